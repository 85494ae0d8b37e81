#!/bin/bash
# r2_restore_compacted.sh VARIANT: backup restore of a after b compacted a's later changes into its baseline.
#  VARIANT=addfirst: the restored a adds z1 before it syncs; syncfirst: sync, then add.
. $(dirname $(readlink -f $0))/common.sh
V=${1:-addfirst}; D=$W/r2; setup $D 18170 a b; A=$D/a
pl $A list add L >/dev/null; for x in x1 x2 x3; do pl $A add L $x >/dev/null; done
agent $D/b 18171; BP=$AGENT_PID; sleep 0.5
pl $A sync --no-discovery >/dev/null
rm -rf $D/snap; cp -a $A $D/snap          # the backup
for x in y1 y2 y3; do pl $A add L $x >/dev/null; done
pl $A done x1 >/dev/null
pl $A sync --no-discovery | sed 's/^/sync2: /'
pl $D/b add L b0 >/dev/null; pl $A sync --no-discovery >/dev/null; stopagent $BP
echo "--- b compacts"; pl $D/b compact
pl $D/b add L b1 >/dev/null
agent $D/b 18171; BP=$AGENT_PID; sleep 0.5
rm -rf $A; cp -a $D/snap $A              # restore the backup
if [ $V = addfirst ]; then echo "--- add z1 on restored a"; pl $A add L z1; echo rc=$?; fi
for i in 1 2 3; do echo "--- sync $i"; pl $A sync --no-discovery 2>&1 | cut -c1-300; echo "rc=${PIPESTATUS[0]}"; done
if [ $V = syncfirst ]; then echo "--- add z1"; pl $A add L z1; echo rc=$?; echo "--- rejoin"; pl $A rejoin 2>&1 | cut -c1-200; pl $A add L z1; echo rc=$?; fi
echo "--- add z2"; pl $A add L z2 2>&1 | cut -c1-250
for i in 1 2; do echo "--- sync"; pl $A sync --no-discovery 2>&1 | cut -c1-300; done
for h in a b; do echo "== $h: $(items $D/$h | tr '\n' ' ')"; pl $D/$h status | grep -E 'summary|digest|changes'; echo "   doctor:"; pl $D/$h doctor 2>&1 | grep -vE '^  ok|^plait doctor|peer device|→ start' | cut -c1-400; done
echo "--- a show"; pl $A show
stopagent $BP
