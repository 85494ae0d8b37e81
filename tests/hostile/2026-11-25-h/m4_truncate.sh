#!/bin/bash
# m4_truncate.sh: a's plait.db (400 items, synced to b) truncated at rest to several sizes; what show, doctor and
# repair say (is "restore from a backup" said only when SQLite's integrity check fails?), and whether the way out
# doctor gives (move aside + `plait init` + sync) brings the lists back.
. $(dirname $(readlink -f $0))/common.sh
D=$W/m4; setup $D 18113 a b; A=$D/a
pl $A list add L >/dev/null; ( for i in $(seq 1 400); do echo "add L item-$i"; done ) | pl $A batch >/dev/null
agent $D/b 18114; BP=$AGENT_PID; sleep 0.5; pl $A sync --no-discovery >/dev/null
rm -rf $D/good; cp -a $A $D/good; SZ=$(stat -c %s $A/plait.db)
for n in 0 100 4096 $((SZ/2)) $((SZ-4096)); do
  rm -rf $A; cp -a $D/good $A; truncate -s $n $A/plait.db
  ic=$(sqlite3 -readonly $A/plait.db 'pragma integrity_check' 2>&1 | head -1 | cut -c1-60)
  echo "=== truncated to $n of $SZ (sqlite3 integrity_check: $ic)"
  echo "show: $(pl $A show 2>&1 | head -1 | cut -c1-220)"
  echo "doctor: $(pl $A doctor 2>&1 | grep -A1 'FAIL  store' | tr '\n' ' ' | cut -c1-400)"
  echo "repair: $(pl $A repair 2>&1 | tail -1 | cut -c1-220)"
  mv $A/plait.db $D/aside.db; rm -f $A/plait.db-wal $A/plait.db-shm
  echo "init: $(pl $A init 2>&1 | head -1 | cut -c1-200)"; pl $A pair --trust $(pl $D/b id | tail -1) --address 127.0.0.1:18114 >/dev/null; pl $A sync --no-discovery 2>&1 | cut -c1-150
  echo "after init+sync: $(pl $A show 2>&1 | grep -c '\[ \]') items"
done
stopagent $BP
