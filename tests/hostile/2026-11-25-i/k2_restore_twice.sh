#!/bin/bash
# k2_restore_twice.sh: three devices a b c. a backed up; a goes on; b compacts; a restored, adds z1, syncs with b
# (z1 made again); c syncs; then the SAME old backup is restored over a again, a adds z2 and deletes x2, syncs;
# b compacts again; then c, repair and rejoin on a. Any item twice, lost, or resurrected?
. $(dirname $(readlink -f $0))/common.sh
D=$W/k2; setup $D 18270 a b c; A=$D/a; B=$D/b; C=$D/c
pl $A list add L >/dev/null; for x in x1 x2 x3; do pl $A add L $x >/dev/null; done
agent $B 18271; BP=$AGENT_PID; sleep 0.5
pl $A sync --no-discovery >/dev/null; pl $C sync --no-discovery --peer 127.0.0.1:18271 >/dev/null
rm -rf $D/snap; cp -a $A $D/snap
for x in y1 y2 y3; do pl $A add L $x >/dev/null; done; pl $A done x1 >/dev/null
pl $A sync --no-discovery >/dev/null; pl $C sync --no-discovery --peer 127.0.0.1:18271 >/dev/null; stopagent $BP
echo "--- b compacts: $(pl $B compact | head -1)"
agent $B 18271; BP=$AGENT_PID; sleep 0.5
rm -rf $A; cp -a $D/snap $A; pl $A add L z1 >/dev/null
echo "--- restore 1, sync"; pl $A sync --no-discovery --peer 127.0.0.1:18271 2>&1 | cut -c1-200; echo rc=${PIPESTATUS[0]}
pl $C sync --no-discovery --peer 127.0.0.1:18271 | cut -c1-200
rm -rf $A; cp -a $D/snap $A; pl $A add L z2 >/dev/null
echo "--- restore 2 (same backup), add z2, sync"; pl $A sync --no-discovery --peer 127.0.0.1:18271 2>&1 | cut -c1-250; echo rc=${PIPESTATUS[0]}
stopagent $BP; echo "--- b compacts again: $(pl $B compact 2>&1| head -1)"; agent $B 18271; BP=$AGENT_PID; sleep 0.5
pl $A rm x2 >/dev/null; pl $A sync --no-discovery --peer 127.0.0.1:18271 2>&1 | cut -c1-250
echo "--- c syncs"; pl $C sync --no-discovery --peer 127.0.0.1:18271 2>&1 | cut -c1-250
echo "--- repair a"; pl $A repair 2>&1 | grep -iE 'made again|kept|rc' | cut -c1-250
echo "--- rejoin a"; pl $A rejoin 2>&1 | cut -c1-250
pl $A sync --no-discovery --peer 127.0.0.1:18271 2>&1 | cut -c1-250; pl $C sync --no-discovery --peer 127.0.0.1:18271 >/dev/null 2>&1
stopagent $BP
for h in a b c; do echo "== $h: $(itemsj $D/$h | tr '\n' ' ')  $(pl $D/$h status | grep digest | cut -c1-30)"; done
echo "--- doctor a"; pl $A doctor 2>&1 | grep -E 'FAIL|WARN' | cut -c1-300
