#!/bin/bash
# C holds a 50,000-change compacted baseline; A pulls it with `plait sync`, SIGKILLed at various points; then completes.
S=$(cd "$(dirname "$0")" && pwd); P=${PLAIT:-/tmp/hostile/plait}; W=${W:-/tmp/hostile/w}
$S/setup.sh $W >/dev/null
$P list add Big --home $W/C >/dev/null
time (for i in $(seq 1 50000); do echo "add Big item-$i"; done | $P batch --home $W/C | tail -1)
$P agent --home $W/D --listen 127.0.0.1:17404 --no-discovery --api-listen "" > $W/D.log 2>&1 & DPID=$!
sleep 1; $P sync --home $W/C --peer 127.0.0.1:17404 --no-discovery | tail -1   # so compaction may fold (ack)
$P compact --home $W/C | tail -1; kill $DPID
$P agent --home $W/C --listen 127.0.0.1:17402 --no-discovery --api-listen "" > $W/C.log 2>&1 & CPID=$!
sleep 1.5
for d in 0.5 1.0 1.5 2.0 2.5 3.0; do
  $P sync --home $W/A --peer 127.0.0.1:17402 --no-discovery > $W/sync.out 2>&1 & SP=$!
  sleep $d; kill -9 $SP 2>/dev/null && echo "killed sync at ${d}s"; wait $SP 2>/dev/null
  $P status --home $W/A 2>&1 | sed -n 6,7p | tr '\n' ' '; echo
done
$P doctor --home $W/A 2>&1 | grep -E 'FAIL|store|materialized|chains' | grep -v unreachable
time $P sync --home $W/A --peer 127.0.0.1:17402 --no-discovery; echo rc=$?
$P status --home $W/A | sed -n 4,7p; $P status --home $W/C | sed -n 4,7p
$P doctor --home $W/A 2>&1 | grep -E 'FAIL|store|materialized|chains' | grep -v unreachable
kill $CPID
