#!/bin/bash
# k5_kill_rekey.sh N: `plait rejoin --new-key` SIGKILLed just after its Nth rename(2) (strace holds the process
# 3 s after that call returns: N=3 old key.pem moved aside, 4 old cert.pem too, 5 new key.pem in place, 6 new
# cert.pem too, before the store's rejoin). Then what show, status, doctor, sync, rejoin --new-key and rejoin say,
# and whether a and b sync again.
. $(dirname $(readlink -f $0))/common.sh
N=${1:-3}; D=$W/k5; setup $D 18115 a b; A=$D/a
pl $A list add L >/dev/null; pl $A add L before >/dev/null
agent $D/b 18116; BP=$AGENT_PID; sleep 0.5; pl $A sync --no-discovery >/dev/null
strace -f -o /dev/null -e trace=rename -e inject=rename:delay_exit=3000000:when=$N $P rejoin --new-key --home $A --config $A/config.toml > $D/rk.out 2>&1 & SP=$!
sleep 1.5; pkill -KILL -f "plait-h rejoin --new-key --home $A" ; wait $SP 2>/dev/null
echo "killed after rename #$N; home: $(ls $A | tr '\n' ' ')"; echo "retired: $(ls $A/retired/* 2>/dev/null | tr '\n' ' ')"
for c in show status "doctor" "sync --no-discovery" "add L after"; do echo "\$ plait $c"; pl $A $c 2>&1 | grep -vE '^  ok|^plait doctor' | head -4 | cut -c1-260; done
echo "\$ plait rejoin --new-key"; pl $A rejoin --new-key 2>&1 | head -3 | cut -c1-300
echo "\$ plait rejoin"; pl $A rejoin 2>&1 | head -3 | cut -c1-300
echo "\$ plait sync"; pl $A sync --no-discovery 2>&1 | head -3 | cut -c1-300
echo "\$ plait add + sync"; pl $A add L after2 2>&1 | cut -c1-200; pl $A sync --no-discovery 2>&1 | head -2 | cut -c1-300
echo "b: $(items $D/b | tr '\n' ' ')"; pl $D/b peers | cut -c1-200
stopagent $BP
