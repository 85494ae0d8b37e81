#!/bin/bash
# s3 [N]: o and p paired. o backed up with cp -a, o goes on and syncs, backup put back by hand (rm -rf; cp -a),
# N concurrent adds on o as its first writes, then syncs, more edits, syncs, compact on both. Do the abandoned
# timelines hold compaction back?
. /tmp/hostile11/scripts/common.sh
N=${1:-8}; D=$W/s3; setup $D 18720 o p; O=$D/o; PP=$D/p
pl $O list add L >/dev/null; pl $O add L x >/dev/null; pl $O sync --no-discovery --peer 127.0.0.1:18721 >/dev/null 2>&1 || true
agent $PP 18721; PA=$AGENT_PID; sleep 0.5
pl $O sync --no-discovery >/dev/null; cp -a $O $D/bk
pl $O add L y1 >/dev/null; pl $O add L y2 >/dev/null; pl $O sync --no-discovery >/dev/null
rm -rf $O; cp -a $D/bk $O
rm -f $D/out.*; ps=(); for i in $(seq 1 $N); do pl $O add L c$i >$D/out.$i 2>&1 & ps+=($!); done; wait "${ps[@]}"
echo "notes: $(cat $D/out.* | grep -c '^note: this store')"
for k in 1 2; do pl $O sync --no-discovery 2>&1 | cut -c1-200; done
for k in 1 2 3; do pl $O add L late$k >/dev/null; pl $PP add L plate$k >/dev/null; done
pl $O sync --no-discovery >/dev/null; pl $O sync --no-discovery >/dev/null; sleep 0.5
echo "--- compact p"; pl $PP compact 2>&1 | cut -c1-300; echo "--- compact o"; pl $O compact 2>&1 | cut -c1-300
pl $O sync --no-discovery >/dev/null
for h in $O $PP; do echo "== $h"; pl $h status | grep -E 'summary|digest|changes'; done
stopagent $PA
