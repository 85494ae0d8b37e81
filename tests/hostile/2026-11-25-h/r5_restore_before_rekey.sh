#!/bin/bash
# r5_restore_before_rekey.sh: a's home is backed up, then a runs `rejoin --new-key` and syncs (b learns the new
# Device ID); then the backup (old key, old Device ID) is restored over a, an edit is made, and a syncs.
# What do sync, doctor and peers say; does the edit reach b?
. $(dirname $(readlink -f $0))/common.sh
D=$W/r5; setup $D 18121 a b; A=$D/a
pl $A list add L >/dev/null; pl $A add L x1 >/dev/null
agent $D/b 18122; BP=$AGENT_PID; sleep 0.5; pl $A sync --no-discovery >/dev/null
rm -rf $D/snap; cp -a $A $D/snap
pl $A rejoin --new-key | head -1; pl $A add L y1 >/dev/null; pl $A sync --no-discovery | cut -c1-200
rm -rf $A; cp -a $D/snap $A; echo "--- restored the backup (old key)"
pl $A add L z1 2>&1 | cut -c1-200
for i in 1 2; do echo "--- sync"; pl $A sync --no-discovery 2>&1 | cut -c1-400; done
echo "--- doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor' | cut -c1-400
echo "a: $(items $A | tr '\n' ' ')"; echo "b: $(items $D/b | tr '\n' ' ')"
echo "--- peers on b"; pl $D/b peers | cut -c1-250
stopagent $BP
