#!/bin/bash
# c1_concurrent.sh SECONDS [agent|noagent]: on home a with its agent running (or not) (and b's): two `plait add` loops, `plait repair`,
# `plait sync` and `plait compact` loops, and a second `plait agent` on a, all at once. Then every add that said
# ok is on a and b once, doctor is clean, digests equal; every failure message is listed.
. $(dirname $(readlink -f $0))/common.sh
S=${1:-20}; MODE=${2:-agent}; D=$W/c1; setup $D 18175 a b; A=$D/a
pl $A list add L >/dev/null
agent $D/b 18176; BP=$AGENT_PID; AP=; [ $MODE = agent ] && { agent $A 18175; AP=$AGENT_PID; }; sleep 1
end=$(( $(date +%s) + S ))
addloop() { local i=0; while [ $(date +%s) -lt $end ]; do i=$((i+1)); if out=$(pl $A add L "$1-$i" 2>&1); then echo "$1-$i" >> $D/ok.$1; else echo "add $1-$i: $out" >> $D/fail; fi; done; }
cmdloop() { while [ $(date +%s) -lt $end ]; do out=$(pl $A "$@" 2>&1) || echo "$*: $out" >> $D/fail; done; }
rm -f $D/ok.* $D/fail; touch $D/fail
addloop x & p1=$!; addloop y & p2=$!; cmdloop repair & p3=$!; cmdloop sync --no-discovery & p4=$!; cmdloop compact & p5=$!
( while [ $(date +%s) -lt $end ]; do out=$(pl $D/b add L "b-$RANDOM" 2>&1) || echo "b add failed: $out" >> $D/fail; sleep 0.2; done ) & p6=$!
sleep 2; [ $MODE = agent ] && echo "--- second agent on a:" && $P agent --home $A --config $A/config.toml --no-discovery --listen 127.0.0.1:18177 2>&1 | cut -c1-200
wait $p1 $p2 $p3 $p4 $p5 $p6
cat $D/ok.x $D/ok.y > $D/ok
echo "adds ok: $(wc -l < $D/ok); failures: $(wc -l < $D/fail)"; cut -c1-250 $D/fail | sed 's/[0-9A-Z]\{13\}:[0-9]*/T:n/g; s/[xy]-[0-9]*/x-N/' | sort | uniq -c | sort -rn | head -8
sleep 2; pl $A sync --no-discovery | cut -c1-200; sleep 1
for h in a b; do items $D/$h > $D/$h.items; echo "$h: items=$(wc -l < $D/$h.items) dups=$(uniq -d $D/$h.items | wc -l) missing=$(sort $D/ok | comm -23 - $D/$h.items | wc -l) $(pl $D/$h status | grep digest)"; pl $D/$h doctor 2>&1 | grep -E 'FAIL|WARN' | cut -c1-250; done
[ -n "$AP" ] && stopagent $AP; stopagent $BP
grep -E ' (error|warning|critical) ' $A.log $D/b.log | cut -d' ' -f2- | cut -c1-200 | sort | uniq -c | head
