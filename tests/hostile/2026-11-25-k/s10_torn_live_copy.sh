#!/bin/bash
# s10 [TRIES]: o,p paired, agents up. While o commits a 3000-add batch, `cp -a o snap` (possibly torn between
# plait.db and -wal). Then o's agent stopped, o replaced by snap, agent restarted; edits; syncs; compare digests.
. /tmp/hostile11/scripts/common.sh
T=${1:-3}
for t in $(seq 1 $T); do
D=$W/s10; setup $D 18770 o p; O=$D/o; PP=$D/p
pl $O list add L >/dev/null; agent $O 18770; OA=$AGENT_PID; agent $PP 18771; PA=$AGENT_PID; sleep 0.5
for j in 1 2 3; do seq 1 1000 | sed "s/^/add L j${j}_/" | pl $O batch >/dev/null 2>&1; done &
BJ=$!; sleep 0.$((2 + RANDOM % 7)); cp -a $O $D/snap; wait $BJ
stopagent $OA; rm -rf $O; mv $D/snap $O
ic=$(sqlite3 $O/plait.db "pragma integrity_check" 2>&1 | head -1)
agent $O 18770; OA=$AGENT_PID; sleep 3; pl $O add L after-o >/dev/null 2>&1; pl $PP add L after-p >/dev/null; sleep 3
for k in 1 2; do pl $O sync --no-discovery >/dev/null 2>&1; pl $PP sync --no-discovery > /dev/null 2>&1; done
stopagent $OA; stopagent $PA
echo "try $t: snap integrity=$ic note-in-agent-log=$(grep -c 'not the one it was last' $O.log) digests=$(for h in $O $PP; do pl $h status | grep digest; done | sort -u | wc -l) items o/p=$(items $O | wc -l)/$(items $PP | wc -l) summary-o=$(pl $O status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"])') errors=$(grep -ciE 'error|fatal' $O.log)"
done
