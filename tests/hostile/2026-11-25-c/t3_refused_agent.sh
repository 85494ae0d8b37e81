#!/bin/bash
# Area 3: X unpairs Y after a good sync. What Y's own `plait peers`, `plait doctor` and agent log then say about X
# (whose agent refuses Y at every dial). Homes from u0/ (see README).
P=${PLAIT:-/tmp/hostile/plait}; B=/tmp/hostile2; CFG=$B/noapi.toml
rm -rf $B/u; cp -a $B/u0 $B/u; U=$B/u; YID=$($P id --home $U/Y | tail -1)
$P agent --home $U/X --config $CFG --listen 127.0.0.1:17620 > $U/X.log 2>&1 & XP=$!
sleep 0.7
$P sync --home $U/Y --config $CFG --peer 127.0.0.1:17620 | cut -c1-120
$P unpair $YID --home $U/X
echo "--- Y doctor:"; $P doctor --home $U/Y --config $CFG | grep -A1 O5S7
$P agent --home $U/Y --config $CFG --listen 127.0.0.1:17621 > $U/Y.log 2>&1 & YP=$!
sleep 6; kill $YP; wait $YP
echo "--- Y agent log:"; grep O5S7 $U/Y.log | cut -c1-260
echo "--- Y peers:"; $P peers --home $U/Y | grep O5S7
echo "--- X pending:"; $P peers --home $U/X --pending
kill $XP; wait $XP
