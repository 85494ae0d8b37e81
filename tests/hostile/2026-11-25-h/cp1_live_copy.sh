#!/bin/bash
# cp1_live_copy.sh SEED: copy home a with `cp -a` while its agent runs and adds stream in (a torn, not
# crash-consistent copy); then use the copy a2: doctor, add, sync with b (both copies' agents running);
# check: no crash, true messages, every add reported ok on either copy reaches b.
. $(dirname $(readlink -f $0))/common.sh
SEED=${1:-1}; RANDOM=$SEED; echo seed=$SEED
D=$W/cp1; setup $D 18185 a b; A=$D/a; A2=$D/a2
pl $A list add L >/dev/null
agent $D/b 18186; BP=$AGENT_PID; agent $A 18185; AP=$AGENT_PID; sleep 1
: > $D/ok
( for i in $(seq 1 300); do pl $A add L a-$i >/dev/null 2>&1 && echo a-$i >> $D/ok; done ) & LP=$!
sleep 0.$((RANDOM % 9 + 1)); rm -rf $A2; cp -a $A $A2; echo "copied while adding"; wait $LP
ls -la $A2 | grep plait.db | awk '{print $5, $9}' | tr '\n' ' '; echo
echo "--- copy: status"; pl $A2 status 2>&1 | grep -E 'summary|data|rror' | cut -c1-250
echo "--- copy: doctor"; pl $A2 doctor 2>&1 | grep -E 'FAIL|WARN|→' | grep -v 'peer device' | cut -c1-300
echo "--- copy: add"; for i in 1 2 3; do pl $A2 add L c-$i 2>&1 | cut -c1-250 && echo c-$i >> $D/ok; done
echo "--- copy: agent"; $P agent --home $A2 --config $A2/config.toml --no-discovery --listen 127.0.0.1:18187 --peer 127.0.0.1:18186 > $D/a2.log 2>&1 & A2P=$!
sleep 3; for i in 4 5; do pl $A2 add L c-$i 2>&1 | cut -c1-250 && echo c-$i >> $D/ok; done; sleep 2
echo "--- copy: sync"; pl $A2 sync --no-discovery --peer 127.0.0.1:18186 2>&1 | cut -c1-300
echo "--- copy: rejoin --new-key"; pl $A2 rejoin --new-key 2>&1 | cut -c1-250
for i in 6 7; do pl $A2 add L c-$i 2>&1 | cut -c1-250 && echo c-$i >> $D/ok; done; sleep 3
pl $A2 sync --no-discovery --peer 127.0.0.1:18186 2>&1 | cut -c1-300
sleep 2
for h in a a2 b; do items $D/$h > $D/$h.items; echo "$h: items=$(wc -l < $D/$h.items) dups=$(uniq -d $D/$h.items | wc -l) missing=$(sort $D/ok | comm -23 - $D/$h.items | tr '\n' ' ') $(pl $D/$h status | grep digest)"; pl $D/$h doctor 2>&1 | grep -E 'FAIL|WARN' | cut -c1-250; done
stopagent $A2P; stopagent $AP; stopagent $BP
grep -hE ' (error|warning|critical) ' $A.log $D/a2.log $D/b.log | cut -d' ' -f2- | cut -c1-250 | sed 's/[0-9A-Z]\{7\}-[0-9A-Z-]*//g' | sort | uniq -c | head
