#!/bin/bash
# r4_restore_one_edit_3dev.sh [EDIT] [ORDER=ca|ac]: three devices; a compacts, c never does. b is backed up, goes on (y1..y4, seen by
# both), a compacts part of b's later changes; b's backup is restored and b makes ONE edit (EDIT: add | move | done |
# rm) before it syncs; b syncs with c first, then with a; then everyone syncs twice. Checks convergence.
. $(dirname $(readlink -f $0))/common.sh
PA=${PORT:-18388}; PB=$((PA+1)); PC=$((PA+2))  # PORT: another tester's base port
E=${1:-move}; D=$W/r4; setup $D $PA a b c; A=$D/a; B=$D/b; C=$D/c
pl $B list add L >/dev/null; for x in x1 x2 x3; do pl $B add L $x >/dev/null; done
agent $A $PA; AP=$AGENT_PID; agent $C $PC; CP=$AGENT_PID; sleep 0.5
pl $B sync --no-discovery >/dev/null
rm -rf $D/snap; if [ "$RESTORE" = plait ]; then pl $B backup $D/snap >/dev/null; else cp -a $B $D/snap; fi
pl $B add L y1 >/dev/null; pl $B sync --no-discovery >/dev/null
pl $A add L a1 >/dev/null; pl $C add L c1 >/dev/null
pl $B move x1 --after x3 >/dev/null; pl $B done x2 >/dev/null; pl $B add L y4 >/dev/null
pl $B sync --no-discovery >/dev/null; sleep 0.5
echo "--- a compacts"; pl $A compact
if [ "$RESTORE" = plait ]; then pl $B restore $D/snap >/dev/null; else rm -rf $B; cp -a $D/snap $B; fi
echo "--- one edit on restored b ($E)"
case $E in add) pl $B add L z1 --top;; move) pl $B move x3 --top;; done) pl $B done x1;; rm) pl $B rm x3;; esac
if [ "${2:-ca}" = ca ]; then FIRST=$PC SECOND=$PA; echo "--- b syncs with c, then a"; else FIRST=$PA SECOND=$PC; echo "--- b syncs with a, then c"; fi
pl $B sync --no-discovery --peer 127.0.0.1:$FIRST; echo rc=$?; pl $B sync --no-discovery --peer 127.0.0.1:$SECOND; echo rc=$?
for i in 1 2; do for h in a b c; do echo "--- sync $i on $h"; pl $D/$h sync --no-discovery 2>&1 | cut -c1-300; done; done
sleep 1
agent $B $PB; BP=$AGENT_PID; sleep 8
for h in a b c; do echo "-- doctor $h (all agents up)"; pl $D/$h doctor | grep -E 'FAIL|WARN|→' | cut -c1-300; done
echo "-- agents' sessions in 8 s: a $(grep -c 'session with' $A.log), b $(grep -c 'session with' $B.log), c $(grep -c 'session with' $C.log)"; grep -h 'ended:' $A.log $B.log $C.log | sed 's/^[^ ]* //; s/(.......-[^)]*)//' | sort | uniq -c | sort -rn | head -4 | cut -c1-250
echo "--- later edits with all agents up: b adds w1, a adds w2, c adds w3"
pl $B add L w1 >/dev/null; pl $A add L w2 >/dev/null; pl $C add L w3 >/dev/null; sleep ${WAIT:-5}
stopagent $BP; stopagent $AP; stopagent $CP
for h in a b c; do echo "== $h: $(pl $D/$h show | tr '\n' ' ')"; pl $D/$h status | grep -E 'digest|summary|changes'; done
for h in a b c; do echo "-- peers $h"; pl $D/$h peers | sed 's/.*  //'; done
