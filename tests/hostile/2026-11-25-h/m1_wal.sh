#!/bin/bash
# m1_wal.sh MODE SEED: a's agent is SIGKILLed with its -wal holding commits (own edits not yet checkpointed, b's
# changes it took); then the -wal / -shm is mutilated (MODE: delwal delshm delboth flipwal truncwal flipshm zeroshm);
# then status, doctor, add, sync, doctor: are the messages true, does anything get lost, do a and b converge?
. $(dirname $(readlink -f $0))/common.sh
MODE=${1:-delwal}; SEED=${2:-1}; RANDOM=$SEED; echo "mode=$MODE seed=$SEED"
D=$W/m1; setup $D 18165 a b; A=$D/a
pl $A list add L >/dev/null; pl $D/b list add M >/dev/null
agent $D/b 18166; BP=$AGENT_PID; agent $A 18165; AP=$AGENT_PID; sleep 1
ok=$D/ok; : > $ok
for i in $(seq 1 40); do pl $A add L a-$i >/dev/null && echo a-$i >> $ok; pl $D/b add M b-$i >/dev/null && echo b-$i >> $ok; done
sleep 1; pl $D/b stop 2>/dev/null
# b goes offline; a edits more (held only by a)
stopagent $BP
for i in $(seq 41 60); do pl $A add L a-$i >/dev/null && echo a-$i >> $ok; done
kill -KILL $AP; wait $AP 2>/dev/null
ls -la $A | grep plait.db | awk '{print $5, $9}' | tr '\n' ' '; echo
W_=$A/plait.db-wal; S_=$A/plait.db-shm
case $MODE in
delwal) rm -f $W_;; delshm) rm -f $S_;; delboth) rm -f $W_ $S_;;
flipwal) sz=$(stat -c %s $W_); off=$(( (RANDOM*32768+RANDOM) % sz )); printf "flip wal at $off of $sz\n"; python3 -c "import sys;f=open('$W_','r+b');f.seek($off);b=f.read(1);f.seek($off);f.write(bytes([b[0]^0xff]))";;
truncwal) sz=$(stat -c %s $W_); n=$(( (RANDOM*32768+RANDOM) % sz )); echo "truncate wal to $n of $sz"; truncate -s $n $W_;;
flipshm) sz=$(stat -c %s $S_); off=$(( (RANDOM*32768+RANDOM) % 4096 )); echo "flip shm at $off"; python3 -c "import sys;f=open('$S_','r+b');f.seek($off);b=f.read(1);f.seek($off);f.write(bytes([b[0]^0xff]))";;
zeroshm) : > $S_;;
esac
echo "--- status"; pl $A status 2>&1 | grep -E 'summary|data|Error|warn' | cut -c1-250
echo "--- doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|peer device|unreachable|→ start|^plait doctor' | cut -c1-300
echo "a items now: $(items $A | wc -l); reported-ok a-items missing on a: $(grep '^a-' $ok | sort | comm -23 - <(items $A | sort) | tr '\n' ' ')"
echo "--- add a-61"; pl $A add L a-61 2>&1 | cut -c1-250 && echo a-61 >> $ok
agent $D/b 18166; BP=$AGENT_PID; sleep 1
echo "--- sync"; pl $A sync --no-discovery 2>&1 | cut -c1-300
echo "--- sync again"; pl $A sync --no-discovery 2>&1 | cut -c1-300
echo "--- doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor' | cut -c1-300
for h in a b; do items $D/$h > $D/$h.items; echo "$h: items=$(wc -l < $D/$h.items) dups=$(uniq -d $D/$h.items | wc -l) missing=$(sort $ok | comm -23 - $D/$h.items | tr '\n' ' ') $(pl $D/$h status | grep digest)"; done
stopagent $BP
