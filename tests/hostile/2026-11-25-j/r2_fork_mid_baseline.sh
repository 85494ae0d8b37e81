#!/bin/bash
# r2_fork_mid_baseline.sh [M]: like r1, but the peer's baseline folds only the first changes b made after its backup,
# and holds b's later ones as plain changes (the cut-off falls inside what the backup lost). b's backup is restored,
# b makes M adds offline, b syncs, follows the advice, syncs again.
. $(dirname $(readlink -f $0))/common.sh
M=${1:-5}; D=$W/r2; setup $D 18384 a b; A=$D/a; B=$D/b
pl $B list add L >/dev/null; for x in x1 x2; do pl $B add L $x >/dev/null; done
agent $A 18384; AP=$AGENT_PID; sleep 0.5
pl $B sync --no-discovery >/dev/null
rm -rf $D/snap; if [ "$RESTORE" = plait ]; then pl $B backup $D/snap >/dev/null; else cp -a $B $D/snap; fi                     # the backup of b
pl $B add L y1 >/dev/null; pl $B sync --no-discovery >/dev/null
pl $A add L a1 >/dev/null                            # a's head: one above y1
for x in y2 y3 y4; do pl $B add L $x >/dev/null; done # b does not know a1 yet: y2 has a1's Lamport time
pl $B sync --no-discovery >/dev/null
echo "--- a compacts (the cut-off is a1's Lamport time: y1, y2 folded, y3, y4 stay)"; pl $A compact
if [ "$RESTORE" = plait ]; then pl $B restore $D/snap >/dev/null; else rm -rf $B; cp -a $D/snap $B; fi                          # restore b's backup
for i in $(seq 1 $M); do pl $B add L z$i >/dev/null; done
echo "--- sync 1 (b)"; pl $B sync --no-discovery; echo "rc=$?"
echo "--- doctor b"; pl $B doctor | grep -v '^  ok'
echo "--- doctor a"; pl $A doctor | grep -v '^  ok'
echo "--- rejoin b"; pl $B rejoin; echo "rc=$?"
echo "--- sync 2 (b)"; pl $B sync --no-discovery; echo "rc=$?"
echo "--- repair b"; pl $B repair; echo "rc=$?"
echo "--- sync 3 (b)"; pl $B sync --no-discovery; echo "rc=$?"
echo "--- doctor b"; pl $B doctor | grep -v '^  ok'
stopagent $AP
for h in a b; do echo "== $h: $(itemsj $D/$h | tr '\n' ' ')"; pl $D/$h status | grep -E 'digest|summary|baseline'; done
