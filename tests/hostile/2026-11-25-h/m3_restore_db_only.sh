#!/bin/bash
# m3_restore_db_only.sh MODE: a's agent dies (SIGKILL) with commits in its -wal; the user then restores only
# plait.db from an older backup (MODE=keepwal: the newer -wal and -shm stay beside it; MODE=staleshm: the -wal is
# removed, the -shm stays; MODE=backupwal: the backup's plait.db and its own -wal). What do show, doctor, add,
# sync say, and do a and b converge without loss?
. $(dirname $(readlink -f $0))/common.sh
MODE=${1:-keepwal}; D=$W/m3; setup $D 18103 a b; A=$D/a
pl $A list add L >/dev/null; for i in $(seq 1 30); do pl $A add L x-$i >/dev/null; done
agent $D/b 18104; BP=$AGENT_PID; pl $A sync --no-discovery >/dev/null
mkdir -p $D/bak; cp $A/plait.db $D/bak/    # backup of the file at rest
agent $A 18103; AP=$AGENT_PID; sleep 1
for i in $(seq 1 30); do pl $A add L y-$i >/dev/null; pl $D/b add L b-$i >/dev/null; done; sleep 1
kill -KILL $AP; wait $AP 2>/dev/null
ls -la $A | grep plait.db | awk '{print $5, $9}' | tr '\n' ' '; echo
case $MODE in
keepwal) cp $D/bak/plait.db $A/plait.db;;
staleshm) cp $D/bak/plait.db $A/plait.db; rm $A/plait.db-wal;;
esac
echo "--- show: $(pl $A show 2>&1 | grep -c '\[ \]') items; $(pl $A show 2>&1 | grep -m1 -iE 'error|warn' | cut -c1-250)"
echo "--- sqlite integrity: $(sqlite3 -readonly $A/plait.db 'pragma integrity_check' 2>&1 | head -2 | tr '\n' ' ')"
echo "--- doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor|peer device|→ start' | cut -c1-300
echo "--- add"; pl $A add L z1 2>&1 | cut -c1-250
echo "--- sync"; pl $A sync --no-discovery 2>&1 | cut -c1-300
echo "--- sync"; pl $A sync --no-discovery 2>&1 | cut -c1-300
for h in a b; do items $D/$h > $D/$h.items; echo "$h: items=$(wc -l < $D/$h.items) dups=$(uniq -d $D/$h.items | wc -l) $(pl $D/$h status | grep digest)"; pl $D/$h doctor 2>&1 | grep -E 'FAIL|WARN' | cut -c1-250; done
stopagent $BP
