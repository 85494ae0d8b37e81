#!/bin/bash
# E4: three honest agents A B C (17930-17932) all paired; for SECS s: edits on all three from other processes
# (`add` every 0.3 s, a `batch` of 300 every 10 s), an agent SIGKILLed or SIGTERMed and restarted every 6 s,
# one-shot `plait sync` runs between the homes in parallel. Then all agents run 15 s to settle and stop.
# Looks for a claim on a device's own timeline ("claims this device's timeline", "beyond this device's head",
# doctor FAIL) that honest software should never produce.  usage: e4_chaos.sh [SECS] [SEED]
. $(dirname $(readlink -f $0))/common.sh; D=$W/e4; SECS=${1:-60}; RANDOM=${2:-1}
setup $D 17930 A B C
declare -A PORT=([A]=17930 [B]=17931 [C]=17932) PID
for h in A B C; do agent $D/$h ${PORT[$h]}; PID[$h]=$AGENT_PID; done
for h in A B C; do $P list add L$h --home $D/$h >/dev/null 2>&1; done
END=$((SECONDS + SECS)); EP=""
for h in A B C; do ( i=0; while [ $SECONDS -lt $END ]; do i=$((i+1)); $P add L$h "$h edit $i" --home $D/$h >/dev/null 2>>$D/edit-errors.txt
  [ $((i % 30)) = 0 ] && ( for k in $(seq 1 300); do echo "add L$h \"$h batch $i $k\""; done ) | $P batch --home $D/$h >/dev/null 2>>$D/edit-errors.txt
  sleep 0.3; done ) & EP="$EP $!"; done
( while [ $SECONDS -lt $END ]; do sleep 2; a=$(echo A B C | tr ' ' '\n' | shuf -n1 --random-source=<(yes $RANDOM)); b=$(echo A B C | tr ' ' '\n' | grep -v $a | shuf -n1)
  $P sync --home $D/$a --config $D/$a/config.toml --peer 127.0.0.1:${PORT[$b]} --timeout 20 >> $D/syncs.txt 2>&1; done ) & SP=$!
n=0; while [ $SECONDS -lt $END ]; do sleep 6; n=$((n+1)); h=$(echo A B C | cut -d' ' -f$(( (RANDOM % 3) + 1 )))
  if [ $((n % 2)) = 0 ]; then sig=KILL; else sig=TERM; fi
  kill -$sig ${PID[$h]}; wait ${PID[$h]} 2>/dev/null; echo "$(date +%T) $sig $h" >> $D/chaos.txt; sleep 1
  agent $D/$h ${PORT[$h]}; PID[$h]=$AGENT_PID; done
wait $EP $SP
sleep 15
for h in A B C; do stopagent ${PID[$h]}; done
echo "chaos: $(tr '\n' ' ' < $D/chaos.txt)"
echo "edit errors: $(sort $D/edit-errors.txt | uniq -c | head -5)"
echo "one-shot syncs:"; grep -v "^this device" $D/syncs.txt | sed 's/[A-Z0-9]\{13\}:[0-9]*/T:n/g; s/pulled [0-9]* changes, sent [0-9]*/pulled N, sent M/' | cut -c1-160 | sort | uniq -c
for h in A B C; do echo "--- $h: status digest: $($P status --home $D/$h 2>&1 | grep -i digest | head -1)"
  $P peers --home $D/$h | cut -c1-170; $P doctor --home $D/$h --config $D/$h/config.toml 2>&1 | grep -v "^ok\|^  ok\|OK" | head -8
  grep -a -i "claims\|beyond this device\|own timeline" $D/$h.log | cut -c1-250 | head -3; done
