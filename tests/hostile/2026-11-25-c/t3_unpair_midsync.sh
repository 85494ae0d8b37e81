#!/bin/bash
# Area 3: `plait unpair Y` on X while Y's `plait sync` pulls 50,002 changes from X's agent.
# usage: t3_unpair_midsync.sh DELAY [MODE]   (homes from u0/, made by setup2.sh u 17620 X Y Z + 50,001-line batch on X)
# MODE sync (default): Y runs `plait sync --peer X`; MODE agent: Y runs `plait agent --peer X`.
P=${PLAIT:-/tmp/hostile/plait}; B=/tmp/hostile2; CFG=$B/noapi.toml
DELAY=${1:-0.3}; MODE=${2:-sync}
rm -rf $B/u; cp -a $B/u0 $B/u; U=$B/u
YID=$($P id --home $U/Y | tail -1)
$P agent --home $U/X --config $CFG --listen 127.0.0.1:17620 > $U/X.log 2>&1 & XP=$!
sleep 1
if [ $MODE = sync ]; then
  $P sync --home $U/Y --config $CFG --peer 127.0.0.1:17620 > $U/y.out 2>&1 & SP=$!
else
  $P agent --home $U/Y --config $CFG --listen 127.0.0.1:17621 --peer 127.0.0.1:17620 > $U/y.out 2>&1 & SP=$!
fi
sleep $DELAY
echo "unpair at $(date +%T.%N | cut -c1-12): $($P unpair $YID --home $U/X)"
if [ $MODE = sync ]; then wait $SP; echo "Y sync rc=$?"; else sleep 8; kill $SP; wait $SP; fi
cat $U/y.out | cut -c1-300
echo "Y status: $($P status --home $U/Y | grep summary)"
echo "X peers:"; $P peers --home $U/X
echo "X pending:"; $P peers --home $U/X --pending
grep -v "avahi\|API\|api" $U/X.log | sed 's/^2026-11-25T//' | cut -c1-250
kill $XP; wait $XP
