#!/bin/bash
# agent on A; C edits and syncs to A in a loop; meanwhile on A: add, compact, repair, rejoin, sync from other shells.
S=$(cd "$(dirname "$0")" && pwd); P=${PLAIT:-/tmp/hostile/plait}; W=${W:-/tmp/hostile/w}
$S/setup.sh $W >/dev/null
$P list add LA --home $W/A >/dev/null; $P list add LC --home $W/C >/dev/null
$P agent --home $W/A --listen 127.0.0.1:17401 --no-discovery --api-listen "" > $W/A.log 2>&1 & APID=$!
$P agent --home $W/C --listen 127.0.0.1:17402 --no-discovery --api-listen "" > $W/C.log 2>&1 & CPID=$!
sleep 2
( for i in $(seq 1 40); do $P add LC c$i --home $W/C >/dev/null 2>&1 || echo "C add $i failed"; done ) &
( for i in $(seq 1 40); do $P add LA a$i --home $W/A >/dev/null 2>&1 || echo "A add $i failed: $($P add LA a$i --home $W/A 2>&1|tail -1)"; done ) &
( for i in 1 2 3 4; do $P compact --home $W/A 2>&1 | tail -1 | sed 's/^/compact: /'; sleep 0.5; done ) &
( for i in 1 2; do $P repair --home $W/A 2>&1 | tail -1 | sed 's/^/repair: /'; sleep 1; done ) &
( sleep 1; $P rejoin --home $W/A 2>&1 | tail -1 | sed 's/^/rejoin: /' ) &
( for i in 1 2 3; do $P sync --home $W/A --peer 127.0.0.1:17402 --no-discovery 2>&1 | tail -1 | sed 's/^/sync: /'; sleep 1; done ) &
wait %3 %4 %5 %6 %7 %8 2>/dev/null; sleep 5
for x in A C; do echo "== $x"; $P status --home $W/$x | sed -n 4,7p; $P doctor --home $W/$x 2>&1 | grep -E 'FAIL|store|materialized|chains' | grep -v unreachable; done
echo "A items: $($P show --home $W/A | grep -c '\[ \]')  C items: $($P show --home $W/C | grep -c '\[ \]')"
grep -iE ' error | warning ' $W/A.log $W/C.log | cut -c1-250 | head
kill $APID $CPID
