#!/bin/bash
# r3_fork_mid_baseline_agents.sh [M]: r2 with agents on both homes instead of `plait sync`: how many sessions and errors
# in 10 s, then `plait rejoin` on b and 5 s more.
. $(dirname $(readlink -f $0))/common.sh
M=${1:-5}; D=$W/r2a; setup $D 18386 a b; A=$D/a; B=$D/b
pl $B list add L >/dev/null; for x in x1 x2; do pl $B add L $x >/dev/null; done
agent $A 18386; AP=$AGENT_PID; sleep 0.5
pl $B sync --no-discovery >/dev/null
rm -rf $D/snap; cp -a $B $D/snap                     # the backup of b
pl $B add L y1 >/dev/null; pl $B sync --no-discovery >/dev/null
pl $A add L a1 >/dev/null                            # a's head: one above y1
for x in y2 y3 y4; do pl $B add L $x >/dev/null; done # b does not know a1 yet: y2 has a1's Lamport time
pl $B sync --no-discovery >/dev/null
echo "--- a compacts (the cut-off is a1's Lamport time: y1, y2 folded, y3, y4 stay)"; pl $A compact
rm -rf $B; cp -a $D/snap $B                          # restore b's backup
for i in $(seq 1 $M); do pl $B add L z$i >/dev/null; done
echo "--- b's agent runs 10 s"; agent $B 18387 --peer 127.0.0.1:18386; BP=$AGENT_PID; sleep 10; stopagent $BP
echo "b log: $(grep -c 'session with' $B.log) sessions, $(grep -ciE 'error|refused' $B.log) error lines"; grep -E 'error|refused|warn' $B.log | sort | uniq -c | sort -rn | head -5 | cut -c1-400
echo "a log: $(grep -c 'session with' $A.log) sessions"; grep -E 'error|refused|warn' $A.log | sed 's/^[^ ]* //' | sort | uniq -c | sort -rn | head -5 | cut -c1-400
echo "--- rejoin b"; pl $B rejoin; echo "rc=$?"
agent $B 18387 --peer 127.0.0.1:18386; BP=$AGENT_PID; sleep 5; stopagent $BP
stopagent $AP
for h in a b; do echo "== $h: $(itemsj $D/$h | tr '\n' ' ')"; pl $D/$h status | grep -E 'digest|summary|baseline'; done
