#!/bin/bash
# r8_compact_during_pull.sh [N] [DELAY]: a holds N uncompacted changes, its agent runs (no scheduled compaction); b pulls
# with `plait sync` while `plait compact` runs on a DELAY seconds into it. Then a second sync; checks equality.
. $(dirname $(readlink -f $0))/common.sh
N=${1:-30000}; DL=${2:-0.3}; D=$W/r8; setup $D 18397 a b; A=$D/a; B=$D/b
printf '[compaction]\ninterval_seconds = 0\n' >> $A/config.toml
pl $A list add L >/dev/null; (for i in $(seq 1 $N); do echo "add L n$i"; done) | pl $A batch | tail -1
pl $B list add B >/dev/null; pl $B add B b1 >/dev/null
agent $A 18397; AP=$AGENT_PID; sleep 0.5
pl $B sync --no-discovery > $D/s1.out 2>&1 & S=$!
sleep $DL; echo "--- compact on a during the pull"; pl $A compact; wait $S; echo "--- sync 1: rc=$? $(cut -c1-300 $D/s1.out)"
pl $A add L a2 >/dev/null
echo "--- sync 2"; pl $B sync --no-discovery | cut -c1-300
stopagent $AP
for h in a b; do pl $D/$h status | grep -E 'digest|data|baseline'; done
echo "items a=$(items $A | wc -l) b=$(items $B | wc -l)"
for h in a b; do echo "-- doctor $h"; pl $D/$h doctor | grep -E 'FAIL|WARN' | grep -v unreachable; done
grep -iE 'error|warn' $A.log | cut -c1-300 | head -5
