#!/bin/bash
# r1_restore.sh VARIANT: restore an old copy of home a over the newer one (a backup restore), then
#  VARIANT=addfirst: add on the restored a before it syncs (its own timeline forks: same seq, other change)
#  VARIANT=syncfirst: sync first, then add
# Then sync both ways with agents; compare items, digests, doctor, peers.
. $(dirname $(readlink -f $0))/common.sh
V=${1:-addfirst}; D=$W/r1; setup $D 18120 a b
pl $D/a list add L >/dev/null; for x in x1 x2 x3; do pl $D/a add L $x >/dev/null; done
agent $D/b 18121; BP=$AGENT_PID; sleep 0.5
pl $D/a sync --no-discovery | sed 's/^/sync1: /'
rm -rf $D/snap; cp -a $D/a $D/snap          # the backup
for x in y1 y2 y3; do pl $D/a add L $x >/dev/null; done
pl $D/a sync --no-discovery | sed 's/^/sync2: /'
pl $D/b add L b1 >/dev/null
rm -rf $D/a; cp -a $D/snap $D/a              # restore the backup
echo "--- restored a: status"; pl $D/a status | grep -E 'summary|data'
if [ $V = addfirst ]; then echo "--- add z1 on restored a"; pl $D/a add L z1; echo rc=$?; fi
echo "--- sync restored a"; pl $D/a sync --no-discovery 2>&1; echo rc=$?
if [ $V = syncfirst ]; then echo "--- add z1 on restored a"; pl $D/a add L z1; echo rc=$?; fi
echo "--- sync again"; pl $D/a sync --no-discovery 2>&1; echo rc=$?; echo "[b log lines: $(wc -l < $D/b.log)]"
echo "--- add z2"; pl $D/a add L z2; echo rc=$?
echo "--- sync again"; pl $D/a sync --no-discovery 2>&1; echo rc=$?; echo "[b log lines: $(wc -l < $D/b.log)]"
for h in a b; do echo "== $h: $(items $D/$h | tr '\n' ' ')"; pl $D/$h status | grep -E 'summary|digest'; done
echo "--- doctor a"; pl $D/a doctor | grep -v '^  ok'
echo "--- peers a"; pl $D/a peers; echo "--- peers b"; pl $D/b peers
stopagent $BP
echo "--- b log"; grep -vE 'listening|local API|agent stopped' $D/b.log | cut -c1-400
