#!/bin/bash
# A/fix 2 (after t3_peers_live.sh of 2026-11-25-c): two paired agents connected; an edit on A reaches B; what
# `plait peers` says on both (expected: "in sync", last seen set). Then restart both, two more edits, again.
. $(dirname $(readlink -f $0))/common.sh; D=$W/a2
setup $D 17810 A B
start() { agent $D/A 17810; AP=$AGENT_PID; agent $D/B 17811; BP=$AGENT_PID; sleep 3; }
stop() { kill $AP $BP; wait $AP $BP; }
start
$P list add L --home $D/A >/dev/null; sleep 2
echo "B shows list L: $($P show --home $D/B | grep -c '^L ')"
echo "--- A peers:"; $P peers --home $D/A; echo "--- B peers:"; $P peers --home $D/B
stop; start
$P add L one --home $D/A >/dev/null; $P add L two --home $D/B >/dev/null; sleep 2
echo "B has items: $($P show L --home $D/B | grep -c '\[ \]')"
echo "--- A peers (after restart, edits on both):"; $P peers --home $D/A; echo "--- B peers:"; $P peers --home $D/B
echo "A summary: $($P status --home $D/A | grep summary)"; echo "B summary: $($P status --home $D/B | grep summary)"
stop
