#!/bin/bash
# A forged (but self-consistent) fork record in the hostile peer's Hello, naming honest C's change C:3
# as the first change of a branch, with a rival hash nobody holds. Then an honest fresh device D syncs with A.
S=$(cd "$(dirname "$0")" && pwd); P=${PLAIT:-/tmp/hostile/plait}; W=${W:-/tmp/hostile/w}
$S/setup.sh $W >/dev/null
$P agent --home $W/A --listen 127.0.0.1:17401 --no-discovery --api-listen "" > $W/A.log 2>&1 & APID=$!
sleep 1.5
$P list add Groceries --home $W/C >/dev/null; for i in milk eggs bread butter; do $P add Groceries $i --home $W/C >/dev/null; done
$P sync --home $W/C --peer 127.0.0.1:17401 --no-discovery
TC=$($P status --home $W/C | awk '/^timeline/{print $2}')
echo "== hostile sends forged record for $TC:3 (base 2, correct)"
python3 $S/t1_forkrec.py 17401 $TC 3 2 | grep -v '<-'
echo "== A:"; $P status --home $W/A | sed -n 4,6p
echo "== fresh D syncs with A (1st)"; $P sync --home $W/D --peer 127.0.0.1:17401 --no-discovery; echo rc=$?
echo "== fresh D syncs with A (2nd)"; $P sync --home $W/D --peer 127.0.0.1:17401 --no-discovery; echo rc=$?
echo "== A after:"; $P status --home $W/A | sed -n 4,7p; $P log --home $W/A | grep -c milk
echo "== D:"; $P status --home $W/D | sed -n 4,6p
echo "== A peers:"; $P peers --home $W/A | awk '{print $2, $NF, $(NF-1), $(NF-2)}'
echo "== A doctor:"; $P doctor --home $W/A 2>&1 | grep -E 'store|materialized|chains'
kill $APID
