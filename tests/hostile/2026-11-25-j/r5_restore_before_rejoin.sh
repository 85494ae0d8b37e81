#!/bin/bash
# r5_restore_before_rejoin.sh [COMPACT] [M]: b is backed up, then runs `plait rejoin` (its old timeline ends) and adds y1;
# everyone syncs; a compacts if COMPACT=yes (default). b's backup (from before the rejoin) is restored, b makes M adds,
# syncs with c (never compacts) and a, and everyone syncs twice. Checks convergence and that z1..zM arrive.
. $(dirname $(readlink -f $0))/common.sh
CO=${1:-yes}; M=${2:-2}; D=$W/r5; setup $D 18391 a b c; A=$D/a; B=$D/b; C=$D/c
pl $B list add L >/dev/null; for x in x1 x2; do pl $B add L $x >/dev/null; done
agent $A 18391; AP=$AGENT_PID; agent $C 18393; CP=$AGENT_PID; sleep 0.5
pl $B sync --no-discovery >/dev/null
rm -rf $D/snap; cp -a $B $D/snap
echo "--- rejoin b"; pl $B rejoin; pl $B add L y1 >/dev/null; pl $B sync --no-discovery >/dev/null
pl $A add L a1 >/dev/null; pl $C add L c1 >/dev/null; sleep 0.5
[ $CO = yes ] && { echo "--- a compacts"; pl $A compact; }
rm -rf $B; cp -a $D/snap $B
echo "--- $M adds on restored b"; for i in $(seq 1 $M); do pl $B add L z$i 2>&1; done
echo "--- b syncs with c, then a"; pl $B sync --no-discovery --peer 127.0.0.1:18393 2>&1 | cut -c1-300; pl $B sync --no-discovery --peer 127.0.0.1:18391 2>&1 | cut -c1-300
for i in 1 2; do for h in a b c; do echo "--- sync $i on $h"; pl $D/$h sync --no-discovery 2>&1 | grep -v unreachable | cut -c1-300; done; done
stopagent $AP; stopagent $CP
for h in a b c; do echo "== $h: $(itemsj $D/$h | tr '\n' ' ')"; pl $D/$h status | grep -E 'digest|summary'; done
for h in a b c; do echo "-- doctor $h"; pl $D/$h doctor | grep -E 'FAIL|WARN|→' | grep -v unreachable | grep -v 'start `plait agent`' | cut -c1-300; done
