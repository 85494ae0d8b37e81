#!/bin/bash
# g2_store_watch_fn.sh VARIANT: a store restored under a running agent in ways other than rm / rename:
#   cpover: `cp backup/plait.db a/plait.db` (same inode, content overwritten; WAL files left as they are)
#   cpall:  `cp backup/plait.db* a/` (db, -wal, -shm overwritten in place)
#   mvhome: `mv a a.old && cp -a backup a` (the whole home moved away and a copy put in its place)
# then: b pushes edits to a's agent, a edits through the CLI; which does the agent do, what do commands see?
. $(dirname $(readlink -f $0))/common.sh
V=${1:-cpover}; D=$W/g2; setup $D 18230 a b; A=$D/a; B=$D/b
pl $A list add L >/dev/null; for x in x1 x2; do pl $A add L $x >/dev/null; done
agent $B 18231; BP=$AGENT_PID; agent $A 18230; AP=$AGENT_PID; sleep 1
pl $A add L x3 >/dev/null; sleep 0.5
sqlite3 $A/plait.db 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null
rm -rf $D/snap; mkdir $D/snap; sqlite3 $A/plait.db ".backup $D/snap/plait.db"   # a consistent backup of the store
pl $A add L y1 >/dev/null; pl $B add L b1 >/dev/null; sleep 1
echo "--- before: a: $(items $A | tr '\n' ' ')"
case $V in
 cpover) cp $D/snap/plait.db $A/plait.db ;;
 cpall) cp $D/snap/plait.db $A/plait.db; : > $A/plait.db-wal ;;
 mvhome) mv $A $D/a.old; cp -a $D/a.old $A; cp $D/snap/plait.db $A/plait.db; rm -f $A/plait.db-wal $A/plait.db-shm ;;
esac
sleep 1; echo "agent alive? $(kill -0 $AP 2>/dev/null && echo yes || echo NO)"
pl $B add L b2 >/dev/null; sleep 1; pl $A add L y2 2>&1 | cut -c1-200; sleep 1
echo "agent alive? $(kill -0 $AP 2>/dev/null && echo yes || echo NO)"
echo "--- a show (through agent if alive)"; items $A | tr '\n' ' '; echo
echo "--- sqlite3 integrity"; sqlite3 $A/plait.db 'PRAGMA integrity_check' 2>&1 | head -3
stopagent $AP
echo "--- after agent stopped: a: $(items $A | tr '\n' ' ')"
echo "--- doctor a"; pl $A doctor 2>&1 | grep -vE '^  ok' | cut -c1-300 | head -8
agent $A 18230; AP=$AGENT_PID; sleep 2; pl $A sync --no-discovery 2>&1 | head -3 | cut -c1-300
stopagent $AP; stopagent $BP
for h in a b; do echo "== $h: $(items $D/$h | tr '\n' ' ')"; done
echo "--- a log"; grep -E 'critical|error|warning' $A.log | cut -c1-300 | head
