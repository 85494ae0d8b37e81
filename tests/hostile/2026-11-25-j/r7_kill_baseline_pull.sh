#!/bin/bash
# r7_kill_baseline_pull.sh [N] [TRIES] [SEED]: a holds N items and compacts them into its baseline (its agent also
# compacts every second); b (paired, empty) pulls with `plait sync`, SIGKILLed after a random delay, TRIES times;
# between tries a adds an item and b adds one too. Then a clean sync, and checks: same digest, every item, doctor.
. $(dirname $(readlink -f $0))/common.sh
N=${1:-5000}; T=${2:-12}; SEED=${3:-1}; RANDOM=$SEED; echo "seed=$SEED"
D=$W/r7; setup $D 18396 a b; A=$D/a; B=$D/b
printf '[compaction]\ninterval_seconds = 1\n' >> $A/config.toml
pl $A list add L >/dev/null
(for i in $(seq 1 $N); do echo "add L n$i"; done) | pl $A batch | tail -1
pl $A compact | tail -1
agent $A 18396; AP=$AGENT_PID; sleep 0.5
for t in $(seq 1 $T); do
  d=$(( (RANDOM % 60) * 10 )); d=$(printf '0.%03d' $d)
  $P sync --no-discovery --home $B --config $B/config.toml > $D/sync.out 2>&1 & S=$!; sleep $d; kill -KILL $S 2>/dev/null; wait $S; rc=$?
  echo "try $t: killed after ${d}s rc=$rc $(head -c 150 $D/sync.out | tr '\n' ' ')"
  pl $A add L a$t >/dev/null; pl $B add L b$t >/dev/null 2>&1 || pl $B list add L2 >/dev/null
done
echo "--- clean sync"; pl $B sync --no-discovery | cut -c1-200; echo "rc=${PIPESTATUS[0]}"; sleep 1.5
echo "--- again"; pl $B sync --no-discovery | cut -c1-200
stopagent $AP
for h in a b; do pl $D/$h status | grep -E 'digest|data|baseline'; done
echo "items a=$(items $A | wc -l) b=$(items $B | wc -l); diff: $(diff <(items $A) <(items $B) | head -5 | tr '\n' ' ')"
for h in a b; do echo "-- doctor $h"; pl $D/$h doctor | grep -E 'FAIL|WARN' | grep -v unreachable; done
