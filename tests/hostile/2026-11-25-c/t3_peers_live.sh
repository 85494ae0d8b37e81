#!/bin/bash
# Areas 3/4: what `plait peers` says about a device whose agent is connected right now.
# Two fresh paired homes (g/A 17680, g/B 17681), both agents running; an edit on A reaches B; then `plait peers`.
# Then: agents restarted (a session ended, so "seen" is recorded), two more edits that reach B live, `plait peers` again.
P=${PLAIT:-/tmp/hostile/plait}; B=/tmp/hostile2; CFG=$B/noapi.toml
rm -rf $B/g; bash $(dirname $(readlink -f $0))/setup2.sh $B/g 17680 A B >/dev/null
start() { $P agent --home $B/g/A --config $CFG --listen 127.0.0.1:17680 >> $B/g/A.log 2>&1 & AP=$!
          $P agent --home $B/g/B --config $CFG --listen 127.0.0.1:17681 >> $B/g/B.log 2>&1 & BP=$!; sleep 3; }
stop() { kill $AP $BP; wait $AP $BP; }
start
$P list add L --home $B/g/A >/dev/null; sleep 2
echo "B shows list L: $($P show --home $B/g/B | grep -c '^L ')"
echo "--- A peers (agents connected, edit delivered):"; $P peers --home $B/g/A
stop; start
$P add L one --home $B/g/A >/dev/null; $P add L two --home $B/g/A >/dev/null; sleep 2
echo "B has items: $($P show L --home $B/g/B | grep -c '\[ \]')"
echo "--- A peers (after a restart, two edits delivered live):"; $P peers --home $B/g/A
echo "--- A status summary: $($P status --home $B/g/A | grep summary)"
echo "--- B status summary: $($P status --home $B/g/B | grep summary)"
stop
