#!/bin/bash
# r9_restore_rejoin_first.sh [ORDER=ca|ac]: three devices, a compacts, c does not. b is backed up, goes on (y1, edits
# of x1), a compacts. b's backup is restored and the user runs `plait rejoin` at once (before any sync), then edits
# x1 (edit, move --top) on the new timeline, whose Lamport times are below a's cut-off. b syncs with c then a (or a
# then c), all sync twice. Checks convergence and what x1 looks like.
. $(dirname $(readlink -f $0))/common.sh
O=${1:-ca}; D=$W/r9; setup $D 18376 a b c; A=$D/a; B=$D/b; C=$D/c
pl $B list add L >/dev/null; for x in x1 x2 x3; do pl $B add L $x >/dev/null; done
agent $A 18376; AP=$AGENT_PID; agent $C 18378; CP=$AGENT_PID; sleep 0.5
pl $B sync --no-discovery >/dev/null
rm -rf $D/snap; if [ "$RESTORE" = plait ]; then pl $B backup $D/snap >/dev/null; else cp -a $B $D/snap; fi
pl $B add L y1 >/dev/null; pl $B edit x1 x1-late >/dev/null; pl $B move x1-late --after x3 >/dev/null; pl $B sync --no-discovery >/dev/null
pl $A add L a1 >/dev/null; pl $C add L c1 >/dev/null; sleep 0.5; pl $B sync --no-discovery >/dev/null; pl $B add L y2 >/dev/null; pl $B sync --no-discovery >/dev/null; sleep 0.5
echo "--- a compacts"; pl $A compact
if [ "$RESTORE" = plait ]; then pl $B restore $D/snap >/dev/null; else rm -rf $B; cp -a $D/snap $B; fi
echo "--- rejoin on restored b, before any sync"; pl $B rejoin
pl $B edit x1 x1-restored; pl $B move x1-restored --top
if [ $O = ca ]; then F=18378 S=18376; else F=18376 S=18378; fi
echo "--- b syncs ($O)"; pl $B sync --no-discovery --peer 127.0.0.1:$F 2>&1 | cut -c1-250; pl $B sync --no-discovery --peer 127.0.0.1:$S 2>&1 | cut -c1-250
for i in 1 2; do for h in a b c; do pl $D/$h sync --no-discovery 2>&1 | grep -v unreachable | grep -v 'pulled 0 changes, sent 0' | sed "s/^/sync $i $h: /" | cut -c1-250; done; done
stopagent $AP; stopagent $CP
for h in a b c; do echo "== $h: $(pl $D/$h show | tr '\n' ' ')"; pl $D/$h status | grep -E 'digest'; done
for h in a b c; do echo "-- doctor $h"; pl $D/$h doctor | grep -E 'FAIL|WARN|→' | grep -v unreachable | grep -v 'start `plait agent`' | cut -c1-250; done
