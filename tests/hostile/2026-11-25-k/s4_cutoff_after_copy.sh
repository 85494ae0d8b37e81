#!/bin/bash
# s4 [cp|plait] [N]: o,p paired (no agents). o backed up (cp -a or plait backup), o goes on + syncs, backup put back
# (rm -rf+cp -a, or plait restore), N concurrent first adds on o, sync, 5 rounds of edits on both + sync, compact both.
# Does the compaction cut-off move past the restore?
. /tmp/hostile11/scripts/common.sh
M=${1:-cp}; N=${2:-1}; D=$W/s4; setup $D 18730 o p; O=$D/o; PP=$D/p
agent $PP 18731; PA=$AGENT_PID; sleep 0.5
pl $O list add L >/dev/null; pl $O add L x >/dev/null; pl $O sync --no-discovery >/dev/null
if [ $M = cp ]; then cp -a $O $D/bk; else pl $O backup $D/bk >/dev/null; fi
pl $O add L y1 >/dev/null; pl $O sync --no-discovery >/dev/null
if [ $M = cp ]; then rm -rf $O; cp -a $D/bk $O; else pl $O restore $D/bk >/dev/null; fi
ps=(); for i in $(seq 1 $N); do pl $O add L c$i >$D/out.$i 2>&1 & ps+=($!); done; wait "${ps[@]}"
echo "notes: $(cat $D/out.* | grep -c '^note: this store')"
for k in $(seq 1 5); do pl $O add L o$k >/dev/null; pl $PP add L p$k >/dev/null; pl $O sync --no-discovery >/dev/null; done
pl $O compact 2>&1 | head -2; pl $PP compact 2>&1 | head -2
pl $O status | grep -E 'summary|changes'; pl $O log | grep timeline
stopagent $PA
