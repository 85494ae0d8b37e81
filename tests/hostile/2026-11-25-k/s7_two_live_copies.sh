#!/bin/bash
# s7: a,b paired, agents up. a's home copied with cp -a WHILE a's agent runs (a2). a2 runs its own agent (--peer b).
# Edits on a, a2, b concurrently for a while; then sync everything, compare show/digest, run doctor; check nothing lost.
. /tmp/hostile11/scripts/common.sh
D=$W/s7; setup $D 18740 a b; A=$D/a; B=$D/b; A2=$D/a2
pl $A list add L >/dev/null; for i in 1 2 3; do pl $A add L x$i >/dev/null; done
agent $A 18740; AP=$AGENT_PID; agent $B 18741; BP=$AGENT_PID; sleep 1
pl $A add L pre-copy >/dev/null; cp -a $A $A2
agent $A2 18742 --peer 127.0.0.1:18741; A2P=$AGENT_PID; sleep 1
for i in $(seq 1 10); do pl $A add L a$i >/dev/null 2>&1 & p1=$!; pl $A2 add L a2_$i >>$D/a2.out 2>&1 & p2=$!; pl $B add L b$i >/dev/null 2>&1 & p3=$!; wait $p1 $p2 $p3; done
pl $A2 edit x1 x1-edited-on-a2 >>$D/a2.out 2>&1; pl $A done x2 >/dev/null; pl $A2 rm x3 >>$D/a2.out 2>&1
sleep 4
echo "notes printed to a2 cmds: $(grep -c '^note' $D/a2.out); a2 agent log notes: $(grep -c 'not the one it was last' $A2.log)"
grep -iE 'copied|copy|same device|twice' $A.log $B.log $A2.log | cut -c1-250 | sort | uniq -c | head -8
stopagent $AP; stopagent $BP; stopagent $A2P
for k in 1 2; do pl $A sync --no-discovery --peer 127.0.0.1:18741 >/dev/null 2>&1; pl $A2 sync --no-discovery --peer 127.0.0.1:18741 >/dev/null 2>&1; done
agent $B 18741; BP=$AGENT_PID; sleep 0.5
for k in 1 2; do pl $A sync --no-discovery --peer 127.0.0.1:18741 2>&1 | cut -c1-200; pl $A2 sync --no-discovery --peer 127.0.0.1:18741 2>&1| cut -c1-200; done
for h in a a2 b; do echo "== $h: items=$(items $D/$h | wc -l) $(pl $D/$h status | grep -E 'digest' ) $(pl $D/$h status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("copied=",d["copied"])')"; done
for h in a a2; do diff <(items $D/$h) <(items $B) >/dev/null && echo "$h==b items" || { echo "$h!=b"; diff <(items $D/$h) <(items $B) | head; }; done
echo "missing any expected? $(for t in a{1..10} a2_{1..10} b{1..10} pre-copy x1-edited-on-a2 x2; do items $B | grep -qx "$t" || echo -n "$t "; done)"
items $B | grep -qx x3 && echo "x3 still present (rm lost)"
stopagent $BP; agent $A 18740; AP=$AGENT_PID; agent $B 18741; BP=$AGENT_PID; sleep 1
for h in a a2 b; do echo "-- doctor $h"; pl $D/$h doctor 2>&1 | grep -E 'FAIL|WARN|copied|copy' | cut -c1-300; done
stopagent $AP; stopagent $BP
