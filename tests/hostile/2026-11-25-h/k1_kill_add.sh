#!/bin/bash
# k1_kill_add.sh SEED [N] [MODE]: SIGKILL `plait add` at random moments (two writer loops on home a at once,
# b's agent running; MODE=agent also runs a's agent so adds go through its socket), plus random `plait sync`
# runs on a killed too. Then: every add that reported success is present exactly once on a and b, no item
# twice, doctor's store/state/chain lines ok, digests equal.
. $(dirname $(readlink -f $0))/common.sh
SEED=${1:-1}; N=${2:-60}; MODE=${3:-plain}; echo "seed=$SEED n=$N mode=$MODE"
D=$W/k1; setup $D 18110 a b
pl $D/a list add L >/dev/null
agent $D/b 18111; BP=$AGENT_PID
AP=; if [ $MODE = agent ]; then agent $D/a 18110; AP=$AGENT_PID; fi
sleep 1
RANDOM=$SEED
ok=$D/ok; : > $ok
loop() { local tag=$1 i d pid
  for i in $(seq 1 $N); do
    d=$((RANDOM % 60))
    $P add L "$tag-$i" --home $D/a --config $D/a/config.toml > $D/out.$tag.$i 2>&1 & pid=$!
    sleep 0.0$((d/10))$((d%10))
    kill -KILL $pid 2>/dev/null; wait $pid; rc=$?
    [ $rc = 0 ] && echo "$tag-$i" >> $ok
    [ $rc != 0 ] && [ $rc != 137 ] && echo "add $tag-$i rc=$rc: $(cat $D/out.$tag.$i)"
    if [ $((RANDOM % 10)) = 0 ]; then $P sync --no-discovery --home $D/a --config $D/a/config.toml > $D/sync.$tag.$i 2>&1 & pid=$!; sleep 0.$((RANDOM%3)); kill -KILL $pid 2>/dev/null; wait $pid; fi
  done; }
loop x & L1=$!; loop y & L2=$!; wait $L1 $L2
echo "reported ok: $(wc -l < $ok) of $((2*N))"
pl $D/a sync --no-discovery; echo "sync rc=$?"
sleep 1
for h in a b; do
  items $D/$h > $D/items.$h
  echo "$h: items=$(wc -l < $D/items.$h) dups=$(sort $D/items.$h | uniq -d | wc -l) missing=$(sort $ok | comm -23 - <(sort -u $D/items.$h) | wc -l)"
  pl $D/$h doctor > $D/doctor.$h 2>&1; echo "$h doctor rc=$?"; grep -E 'FAIL|WARN' $D/doctor.$h | grep -v 'peer device\|unreachable' | head -5
  pl $D/$h status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("digest"), d.get("summary"))'
done
sort $ok | comm -23 - <(sort -u $D/items.b) | head
[ -n "$AP" ] && stopagent $AP; stopagent $BP
grep -iE 'error|warn' $D/*.log | head -5
