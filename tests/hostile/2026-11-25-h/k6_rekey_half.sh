#!/bin/bash
# k6_rekey_half.sh [addfirst|rejoinfirst]: `plait rejoin --new-key` SIGKILLed after its 6th rename (new key.pem and cert.pem in place,
# the store's rejoin not yet run). Then the user goes on: add, sync; then `plait rejoin`, add, sync.
# Do a's edits reach b? What do sync, peers and doctor say?
. $(dirname $(readlink -f $0))/common.sh
V=${1:-addfirst}; D=$W/k6; setup $D 18117 a b; A=$D/a
pl $A list add L >/dev/null; pl $A add L before >/dev/null
agent $D/b 18118; BP=$AGENT_PID; sleep 0.5; pl $A sync --no-discovery >/dev/null
strace -f -o /dev/null -e trace=rename -e inject=rename:delay_exit=3000000:when=6 $P rejoin --new-key --home $A --config $A/config.toml > $D/rk.out 2>&1 & SP=$!
sleep 1.5; pkill -KILL -f "plait-h rejoin --new-key --home $A"; wait $SP 2>/dev/null
echo "killed after rename #6: home $(ls $A | tr '\n' ' ')"
echo "\$ plait status"; pl $A status | head -3 | cut -c1-120
[ $V = addfirst ] && echo "\$ plait add L after1" && pl $A add L after1 2>&1 | cut -c1-200
echo "\$ plait sync"; pl $A sync --no-discovery 2>&1 | cut -c1-400
echo "\$ plait doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor' | cut -c1-300
echo "\$ plait rejoin"; pl $A rejoin 2>&1 | cut -c1-300
echo "\$ plait add L after2"; pl $A add L after2 2>&1 | cut -c1-200
echo "\$ plait sync"; pl $A sync --no-discovery 2>&1 | cut -c1-400
echo "a: $(items $A | tr '\n' ' ')"; echo "b: $(items $D/b | tr '\n' ' ')"
echo "\$ plait peers (b)"; pl $D/b peers | cut -c1-300
echo "--- b's log"; grep -E 'error|warn' $D/b.log | cut -d' ' -f2- | cut -c1-300 | sort | uniq -c | head -5
stopagent $BP
