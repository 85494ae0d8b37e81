#!/bin/bash
# s13 [N]: o,p paired. o copied with cp -a to c (both live, as two machines). N concurrent adds on c as its first writes
# (extra timelines from the race), then c runs `rejoin --new-key` as advised, more edits on all three, syncs, compact on p.
# Which timeline sets the cut-off, and does it ever move?
. /tmp/hostile11/scripts/common.sh
N=${1:-8}; D=$W/s13; setup $D 18780 o p; O=$D/o; PP=$D/p; C=$D/c
pl $O list add L >/dev/null; pl $O add L x >/dev/null; agent $PP 18781; PA=$AGENT_PID; sleep 0.5; pl $O sync --no-discovery >/dev/null
cp -a $O $C
ps=(); for i in $(seq 1 $N); do pl $C add L c$i >$D/out.$i 2>&1 & ps+=($!); done; wait "${ps[@]}"
echo "notes=$(cat $D/out.* | grep -c '^note') c summary: $(pl $C status | grep summary)"
pl $C sync --no-discovery >/dev/null 2>&1; pl $C rejoin --new-key 2>&1 | tail -2 | cut -c1-200
for r in 1 2 3; do for h in $O $PP $C; do pl $h add L e$r$(basename $h) >/dev/null; done; pl $O sync --no-discovery >/dev/null 2>&1; pl $C sync --no-discovery >/dev/null 2>&1; done
pl $C sync --no-discovery 2>&1 | cut -c1-200; pl $O sync --no-discovery >/dev/null 2>&1
echo "--- compact p"; pl $PP compact 2>&1 | head -2 | cut -c1-250
for h in $O $PP $C; do echo "$(basename $h): $(pl $h status | grep -E 'summary')"; done
pl $PP log | grep -E 'timeline\.' | cut -c1-100
stopagent $PA
