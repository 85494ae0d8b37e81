#!/bin/bash
# r1_fork_in_baseline.sh [K] [M]: b backed up; b makes K more adds and syncs them to a; a compacts (folding b's
# timeline); b's backup is restored; b makes M adds offline; then b syncs, follows the advice (rejoin), syncs again.
# Prints each command's output, both homes' items and digests, doctor on both.
. $(dirname $(readlink -f $0))/common.sh
K=${1:-3}; M=${2:-5}; D=$W/r1; setup $D 18380 a b; A=$D/a; B=$D/b
pl $B list add L >/dev/null; for x in x1 x2; do pl $B add L $x >/dev/null; done
agent $A 18380; AP=$AGENT_PID; sleep 0.5
pl $B sync --no-discovery >/dev/null
rm -rf $D/snap; cp -a $B $D/snap                     # the backup of b
for i in $(seq 1 $K); do pl $B add L y$i >/dev/null; done
pl $B sync --no-discovery >/dev/null
pl $A add L a1 >/dev/null                            # a's head is now above b's: the cut-off covers b's timeline
echo "--- a compacts"; pl $A compact
rm -rf $B; cp -a $D/snap $B                          # restore b's backup
for i in $(seq 1 $M); do pl $B add L z$i >/dev/null; done
echo "--- sync 1 (b)"; pl $B sync --no-discovery; echo "rc=$?"
echo "--- doctor b"; pl $B doctor | grep -v '^  ok'
echo "--- doctor a"; pl $A doctor | grep -v '^  ok'
echo "--- rejoin b"; pl $B rejoin; echo "rc=$?"
echo "--- sync 2 (b)"; pl $B sync --no-discovery; echo "rc=$?"
echo "--- sync 3 (b)"; pl $B sync --no-discovery; echo "rc=$?"
stopagent $AP
for h in a b; do echo "== $h: $(itemsj $D/$h | tr '\n' ' ')"; pl $D/$h status | grep -E 'digest|summary|baseline'; done
