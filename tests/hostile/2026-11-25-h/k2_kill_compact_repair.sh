#!/bin/bash
# k2_kill_compact_repair.sh SEED [ROUNDS]: on home a (b's agent running), each round: a batch of 300 adds and
# some done/rm, a sync, then `plait compact` or `plait repair` or `plait sync` SIGKILLed after a random delay.
# After each kill: doctor's verdict on the store, chains and state, and a's items against the expected set.
. $(dirname $(readlink -f $0))/common.sh
SEED=${1:-1}; R=${2:-12}; RANDOM=$SEED; echo "seed=$SEED rounds=$R"
D=$W/k2; setup $D 18160 a b; A=$D/a
pl $A list add L >/dev/null
agent $D/b 18161; BP=$AGENT_PID; sleep 0.5
n=0
for r in $(seq 1 $R); do
  ( for i in $(seq 1 300); do echo "add L r$r-$i"; done; for i in $(seq 1 20); do echo "done r$r-$i"; done ) | pl $A batch > /dev/null || echo "batch failed"
  [ $((RANDOM % 2)) = 0 ] && pl $A sync --no-discovery > /dev/null 2>&1
  case $((RANDOM % 3)) in 0) cmd=compact;; 1) cmd=repair;; 2) cmd="sync --no-discovery";; esac
  d=$((RANDOM % 120))
  $P $cmd --home $A --config $A/config.toml > $D/out.$r 2>&1 & pid=$!
  sleep $(printf '0.%03d' $d); kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null; rc=$?
  cnt=$(items $A | wc -l)
  doc=$(pl $A doctor 2>&1 | grep -E 'FAIL|WARN' | grep -v 'peer device' | cut -c1-200)
  echo "round $r: $cmd killed after ${d}ms rc=$rc items=$cnt (expect $((r*300))) ${doc:+DOCTOR: $doc}"
done
pl $A sync --no-discovery | cut -c1-200; sleep 1
for h in a b; do echo "$h: items=$(items $D/$h | wc -l) dups=$(items $D/$h | uniq -d | wc -l) $(pl $D/$h status | grep digest)"; pl $D/$h doctor | grep -E 'FAIL|WARN' | grep -v 'peer device'; done
stopagent $BP
