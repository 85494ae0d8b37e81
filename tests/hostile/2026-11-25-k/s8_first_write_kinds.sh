#!/bin/bash
# s8: for each kind of first write on a fresh cp -a copy (compact, repair, pair, unpair, rejoin, rejoin --new-key, sync,
# batch, list add, backup, gui, agent start/stop), then one add: is the add on a new timeline, how many new timelines, how many notes?
. /tmp/hostile11/scripts/common.sh
D=$W/s8; setup $D 18750 o p; O=$D/o; PP=$D/p
pl $O list add L >/dev/null; pl $O add L x >/dev/null; agent $PP 18751; PA=$AGENT_PID; sleep 0.5; pl $O sync --no-discovery >/dev/null
OT=$(pl $O status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["timeline"])')
PID_=$($P id --home $PP | tail -1)
try() { local name=$1; shift; rm -rf $D/c $D/c.log; cp -a $O $D/c; local C=$D/c
  ( eval "$*" ) > $D/first.out 2>&1; local rc=$?
  pl $C add L after >$D/add.out 2>&1
  local s=$(pl $C status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["timeline"], d["summary"])')
  local nt=$(echo "$s" | awk '{print $2}' | tr , '\n' | grep -vc "^$OT:")
  echo "$name rc=$rc: add on $([ "${s%% *}" = "$OT" ] && echo ORIGINAL-TIMELINE || echo new) timeline; non-original timelines=$nt; notes first/add=$(grep -c 'not the one it was last' $D/first.out $D/c.log 2>/dev/null | awk -F: '{s+=$2} END{print s}')/$(grep -c '^note' $D/add.out)"; }
try compact 'pl $C compact'
try repair 'pl $C repair'
try pair "pl \$C pair --trust $PID_ --address 127.0.0.1:18751"
try unpair "pl \$C unpair $PID_"
try rejoin 'pl $C rejoin'
try rejoin_newkey 'pl $C rejoin --new-key'
try sync 'pl $C sync --no-discovery'
try batch 'printf "add L b1\nadd L b2\n" | pl $C batch'
try listadd 'pl $C list add M'
try backup 'pl $C backup $D/bk_$RANDOM'
try agent '$P agent --home $C --config $C/config.toml --no-discovery --listen 127.0.0.1:18752 >>$C.log 2>&1 & a=$!; sleep 1.5; kill -TERM $a; wait $a'
try agent_then_restart '$P agent --home $C --config $C/config.toml --no-discovery --listen 127.0.0.1:18752 >>$C.log 2>&1 & a=$!; sleep 1.5; kill -TERM $a; wait $a; $P agent --home $C --config $C/config.toml --no-discovery --listen 127.0.0.1:18752 >>$C.log 2>&1 & a=$!; sleep 1.5; kill -TERM $a; wait $a'
try restore_into_copy 'rm -rf $D/bkr; pl $O backup $D/bkr >/dev/null; pl $C restore $D/bkr'
try doctor_only 'pl $C doctor'
stopagent $PA
