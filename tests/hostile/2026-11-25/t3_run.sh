#!/bin/bash
S=$(cd "$(dirname "$0")" && pwd); P=${PLAIT:-/tmp/hostile/plait}; W=${W:-/tmp/hostile/w}
$S/setup.sh $W >/dev/null
$P list add Groceries --home $W/C >/dev/null; for i in milk eggs bread butter; do $P add Groceries $i --home $W/C >/dev/null; done
TC=$($P status --home $W/C | awk '/^timeline/{print $2}'); echo "C's timeline $TC (6 changes)"
$P agent --home $W/D --listen 127.0.0.1:17404 --no-discovery --api-listen "" > $W/D.log 2>&1 & DPID=$!
sleep 1.5
echo "== hostile -> D: baseline claiming $TC:6 with hostile cert, then forged $TC:7-8"
python3 $S/t3_baseline_claims_timeline.py 17404 $TC 6
echo "== D:"; $P show --home $W/D; $P status --home $W/D | sed -n 4,6p
echo "== honest C syncs with D"; $P sync --home $W/C --peer 127.0.0.1:17404 --no-discovery; echo rc=$?
echo "== D after:"; $P show --home $W/D; $P doctor --home $W/D 2>&1 | grep -E 'store|materialized|chains|fork|FAIL' | grep -v unreachable
echo "== C after:"; $P show --home $W/C
echo "== fresh A syncs from D (spread?)"; $P sync --home $W/A --peer 127.0.0.1:17404 --no-discovery; echo rc=$?; $P show --home $W/A
grep -iE 'refus|fork|error' $W/D.log | cut -c1-300 | head
kill $DPID
