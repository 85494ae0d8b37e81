#!/bin/bash
# s1_false_pos.sh: normal operations on one home of a pair; after each, one add; count own timelines and "note:" lines.
. /tmp/hostile11/scripts/common.sh
D=$W/s1; setup $D 18710 a b; A=$D/a; B=$D/b; L=$W/../logs/s1.log; : > $L
pl $A list add L >/dev/null
own() { pl $A status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["timeline"], d["summary"])'; }
step() { local name=$1; shift; "$@" >>$L 2>&1; pl $A add L "after-$name" >>$L 2>&1; echo "$name: $(own) notes=$(grep -c '^note: this store' $L)"; }
agent $B 18711; BP=$AGENT_PID
step start true
step agent_term bash -c ". /tmp/hostile11/scripts/common.sh; $P agent --home $A --config $A/config.toml --no-discovery --listen 127.0.0.1:18710 >>$A.log 2>&1 & p=\$!; sleep 2; pl $A add L in-agent; sleep 1; kill -TERM \$p; wait \$p"
step agent_kill9 bash -c ". /tmp/hostile11/scripts/common.sh; $P agent --home $A --config $A/config.toml --no-discovery --listen 127.0.0.1:18710 >>$A.log 2>&1 & p=\$!; sleep 2; pl $A add L in-agent2; sleep 0.5; kill -KILL \$p; wait \$p"
step sync pl $A sync --no-discovery
step repair pl $A repair
step compact pl $A compact
step backup pl $A backup $D/bk1
step vacuum sqlite3 $A/plait.db "VACUUM"
step walckpt sqlite3 $A/plait.db "PRAGMA wal_checkpoint(TRUNCATE)"
step mv_within bash -c "mv $A $D/a_moved && mv $D/a_moved $A"
step mv_rename_home bash -c "mv $A $D/a_x; mkdir -p $D/sub; mv $D/a_x $D/sub/a; mv $D/sub/a $A"
step doctor pl $A doctor
step pair_again pl $A pair --trust $($P id --home $B | tail -1) --address 127.0.0.1:18711
step concurrent bash -c ". /tmp/hostile11/scripts/common.sh; for i in \$(seq 1 12); do pl $A add L conc\$i & done; wait"
step rejoin_EXPECT_NEW pl $A rejoin
step restore_EXPECT_NEW pl $A restore $D/bk1
step sync2 pl $A sync --no-discovery
step rejoin_newkey_EXPECT_NEW pl $A rejoin --new-key
step sync3 pl $A sync --no-discovery
step sync4 pl $A sync --no-discovery
stopagent $BP
echo "--- notes in log:"; grep -n 'note:' $L | cut -c1-120
grep -iE 'error|fatal' $L | head
