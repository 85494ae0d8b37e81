#!/bin/bash
# k4_kill_agents.sh SEED [ROUNDS]: three homes a, b, c, agents compacting every second; edits on all three
# (CLI through the agents), and each round one agent SIGKILLed at a random moment and restarted (a `plait add`
# killed now and then too). At the end: every add that said ok is on all three once, equal digests, doctor clean.
. $(dirname $(readlink -f $0))/common.sh
SEED=${1:-1}; R=${2:-15}; RANDOM=$SEED; echo "seed=$SEED rounds=$R"
D=$W/k4; setup $D 18100 a b c
for h in a b c; do printf '[compaction]\ninterval_seconds = 1\n' >> $D/$h/config.toml; done
pl $D/a list add L >/dev/null
declare -A port=([a]=18100 [b]=18101 [c]=18102) pid
for h in a b c; do agent $D/$h ${port[$h]}; pid[$h]=$AGENT_PID; done
sleep 1; : > $D/ok
for r in $(seq 1 $R); do
  for h in a b c; do for i in 1 2 3; do pl $D/$h add L "$h-$r-$i" >/dev/null 2>&1 && echo "$h-$r-$i" >> $D/ok; done; done
  v=$(echo a b c | cut -d' ' -f$((RANDOM % 3 + 1))); d=$((RANDOM % 500))
  ( for i in $(seq 1 10); do pl $D/$v add L "$v-$r-k$i" >/dev/null 2>&1 && echo "$v-$r-k$i" >> $D/ok; done ) & L=$!
  sleep $(printf '0.%03d' $d); kill -KILL ${pid[$v]}; wait ${pid[$v]} 2>/dev/null; wait $L
  $P add L "$v-$r-x" --home $D/$v --config $D/$v/config.toml > /dev/null 2>&1 & X=$!; sleep 0.0$((RANDOM % 5)); kill -KILL $X 2>/dev/null; wait $X 2>/dev/null
  agent $D/$v ${port[$v]}; pid[$v]=$AGENT_PID
  echo "round $r: killed $v's agent after ${d}ms"
  sleep 0.5
done
sleep 4
for h in a b c; do pl $D/$h sync --no-discovery > /dev/null 2>&1; done; sleep 2
for h in a b c; do items $D/$h > $D/$h.items; echo "$h: items=$(wc -l < $D/$h.items) dups=$(uniq -d $D/$h.items | wc -l) missing=$(sort $D/ok | comm -23 - $D/$h.items | tr '\n' ' ') $(pl $D/$h status | grep -E 'digest' | cut -c1-30) $(pl $D/$h status | grep baseline | cut -c1-60)"; pl $D/$h doctor 2>&1 | grep -E 'FAIL|WARN' | cut -c1-250; done
for h in a b c; do stopagent ${pid[$h]}; done
grep -hE ' (error|critical|warning) ' $D/*.log | cut -d' ' -f2- | cut -c1-180 | sed 's/[0-9A-Z]\{7\}-[0-9A-Z-]*//g; s/[0-9A-Z]\{13\}:[0-9-]*/T:n/g' | sort | uniq -c | head
