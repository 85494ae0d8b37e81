#!/bin/bash
# r11_restore_agents_only.sh [EDIT]: J2 with agents only, no one-shot sync after the restore: a's agent is down
# while the restored b's agent meets c's; a's agent comes back 3 s later. Otherwise as r4: three devices; a compacts, c never does. b is backed up, goes on (y1..y4, seen by
# both), a compacts part of b's later changes; b's backup is restored and b makes ONE edit (EDIT: add | move | done |
# rm) before its agent starts. Checks convergence and whether later edits cross.
. $(dirname $(readlink -f $0))/common.sh
E=${1:-move}; D=$W/r11; setup $D 18366 a b c; A=$D/a; B=$D/b; C=$D/c
pl $B list add L >/dev/null; for x in x1 x2 x3; do pl $B add L $x >/dev/null; done
agent $A 18366; AP=$AGENT_PID; agent $C 18368; CP=$AGENT_PID; sleep 0.5
pl $B sync --no-discovery >/dev/null
rm -rf $D/snap; cp -a $B $D/snap
pl $B add L y1 >/dev/null; pl $B sync --no-discovery >/dev/null
pl $A add L a1 >/dev/null; pl $C add L c1 >/dev/null
pl $B move x1 --after x3 >/dev/null; pl $B done x2 >/dev/null; pl $B add L y4 >/dev/null
pl $B sync --no-discovery >/dev/null; sleep 0.5
echo "--- a compacts"; pl $A compact
stopagent $AP; echo "--- a's agent is down"
rm -rf $B; cp -a $D/snap $B
echo "--- one edit on restored b ($E)"
case $E in add) pl $B add L z1 --top;; move) pl $B move x3 --top;; done) pl $B done x1;; rm) pl $B rm x3;; esac
agent $B 18367; BP=$AGENT_PID; sleep 3; echo "--- a's agent back"; agent $A 18366; AP=$AGENT_PID; sleep 10
for h in a b c; do echo "-- doctor $h (all agents up)"; pl $D/$h doctor | grep -E 'FAIL|WARN|→' | cut -c1-300; done
echo "-- sessions ended with an error: $(grep -h 'ended:' $A.log $B.log $C.log | grep -vc 'pulled')"; grep -h 'ended:' $A.log $B.log $C.log | grep -v pulled | sed 's/^[^ ]* //; s/(.......-[^)]*)//' | sort | uniq -c | sort -rn | head -3 | cut -c1-250
echo "--- later edits with all agents up: b adds w1, a adds w2, c adds w3"
pl $B add L w1 >/dev/null; pl $A add L w2 >/dev/null; pl $C add L w3 >/dev/null; sleep ${WAIT:-5}
stopagent $BP; stopagent $AP; stopagent $CP
for h in a b c; do echo "== $h: $(pl $D/$h show | tr '\n' ' ')"; pl $D/$h status | grep -E 'digest|summary|changes'; done
for h in a b c; do echo "-- peers $h"; pl $D/$h peers | sed 's/.*  //'; done
