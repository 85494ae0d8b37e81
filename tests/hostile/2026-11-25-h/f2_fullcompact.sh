#!/bin/bash
# f2_fullcompact.sh SEED: a (8 MiB tmpfs) holds 3000 items from b; its disk is filled to K kB; then `plait compact`,
# a's agent receiving b's pushes of 600 more, adds on a; then space is freed; check convergence and doctor.
. $(dirname $(readlink -f $0))/common.sh
SEED=${1:-1}; RANDOM=$SEED; echo seed=$SEED
D=$W/f2; rm -rf $D; mkdir -p $D/mnt
mount -t tmpfs -o size=8m tmpfs $D/mnt || exit 1
trap 'stopall; kill -TERM $AP 2>/dev/null; wait $AP 2>/dev/null; umount $D/mnt' EXIT
A=$D/mnt/a; mkhome $A a; mkhome $D/b b
pl $A pair --trust $(pl $D/b id | tail -1) --address 127.0.0.1:18141 >/dev/null
pl $D/b pair --trust $(pl $A id | tail -1) --address 127.0.0.1:18140 >/dev/null
ok=$D/ok; : > $ok
pl $A list add L >/dev/null; pl $D/b list add M >/dev/null
( for i in $(seq 1 3000); do echo "add M b-$i-$(head -c 100 /dev/zero | tr '\0' x)"; done ) | pl $D/b batch >/dev/null
agent $D/b 18141; BP=$AGENT_PID; sleep 0.5
pl $A sync --no-discovery | cut -c1-200
pl $A add L a-0 >/dev/null && echo a-0 >> $ok
$P agent --home $A --config $A/config.toml --no-discovery --listen 127.0.0.1:18140 > $D/a-agent.log 2>&1 & AP=$!; sleep 1.5
K=${2:-$((RANDOM % 300))}; echo "leaving ${K} kB"
avail=$(df -k --output=avail $D/mnt | tail -1); dd if=/dev/zero of=$D/mnt/filler bs=1k count=$((avail - K)) 2>/dev/null
df -k $D/mnt | tail -1; ls -la $A | grep plait.db
echo "--- compact while full (through the agent)"; pl $A compact 2>&1 | cut -c1-300; echo "rc=${PIPESTATUS[0]}"
pl $A status 2>&1 | tail -2
echo "--- doctor while full"; pl $A doctor 2>&1 | grep -v '^  ok' | cut -c1-300
echo "--- a's agent while b pushes 600"
( for i in $(seq 1 600); do echo "add M c-$i"; done ) | pl $D/b batch >/dev/null
for i in 1 2 3; do out=$(pl $A add L "a-$i" 2>&1) && echo "a-$i" >> $ok; echo "add a-$i: $out" | cut -c1-200; done
sleep 3; echo "--- free space"; rm $D/mnt/filler; sleep 4
pl $A add L after-free && echo after-free >> $ok; sleep 3
pl $A compact 2>&1 | cut -c1-200
kill -0 $AP && echo "a's agent still running" || echo "a's agent gone rc=$(wait $AP; echo $?)"
stopagent $AP; grep -E 'error|warn|critical|Fatal' $D/a-agent.log | cut -c1-250 | cut -d' ' -f2- | sort | uniq -c | head
for h in $A $D/b; do items $h > $D/$(basename $h).items; echo "$(basename $h): items=$(wc -l < $D/$(basename $h).items) dups=$(sort $D/$(basename $h).items | uniq -d | wc -l) missing=$(sort $ok | comm -23 - <(sort -u $D/$(basename $h).items) | tr '\n' ' ')"
  pl $h status | grep -E 'digest|summary'; pl $h doctor 2>&1 | grep -v '^  ok' | grep -v 'peer device\|unreachable\|→ start' | cut -c1-300; done
ls -la $A | grep plait.db
stopagent $BP
