#!/bin/bash
# r4_rename_restore_live.sh: while a's agent runs, an older backup of plait.db is put in place the way rsync or
# a restore tool does it (MODE warm|cold) (copy to a temporary name, rename over plait.db: a new inode; -wal/-shm left).
# Then edits through the agent, show, doctor, sync with b; after the agent stops: what is in the store,
# integrity, doctor, and do a and b converge with every edit?
. $(dirname $(readlink -f $0))/common.sh
D=$W/r4; setup $D 18109 a b; A=$D/a; : > $D/ok
pl $A list add L >/dev/null; for i in $(seq 1 20); do pl $A add L x-$i >/dev/null && echo x-$i >> $D/ok; done
cp $A/plait.db $D/bak.db                       # backup at rest
for i in $(seq 1 20); do pl $A add L y-$i >/dev/null && echo y-$i >> $D/ok; done
agent $A 18109; AP=$AGENT_PID; sleep 1
[ "${1:-warm}" = warm ] && pl $A add L z-0 >/dev/null && echo z-0 >> $D/ok     # MODE=warm: the agent writes once before the restore (cold: it has not written yet)
cp $D/bak.db $A/.plait.db.tmp && mv $A/.plait.db.tmp $A/plait.db
echo "restored the backup under the running agent"
for i in 1 2 3; do out=$(pl $A add L z-$i 2>&1) && echo z-$i >> $D/ok; echo "add z-$i: $out" | cut -c1-200; done
echo "show through the agent: $(pl $A show 2>&1 | grep -c '\[ \]') items"
echo "--- doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor|peer device|→ start' | cut -c1-300
agent $D/b 18110; BP=$AGENT_PID; sleep 3
echo "b: $(items $D/b | wc -l) items"
stopagent $AP; echo "--- a's agent stopped"
echo "integrity: $(sqlite3 -readonly $A/plait.db 'pragma integrity_check' 2>&1 | head -3 | tr '\n' ' ')"
echo "a show: $(pl $A show 2>&1 | grep -c '\[ \]') items; $(pl $A show 2>&1 | grep -i error | cut -c1-200)"
echo "--- doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor|→ start' | cut -c1-300
pl $A sync --no-discovery 2>&1 | cut -c1-300; sleep 1
for h in a b; do items $D/$h > $D/$h.items; echo "$h: items=$(wc -l < $D/$h.items) dups=$(uniq -d $D/$h.items | wc -l) missing=$(sort $D/ok | comm -23 - $D/$h.items | tr '\n' ' ')"; done
stopagent $BP; grep -hE ' (error|warning) ' $A.log | cut -d' ' -f2- | cut -c1-200 | sort | uniq -c | head
