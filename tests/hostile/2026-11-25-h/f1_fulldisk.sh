#!/bin/bash
# f1_fulldisk.sh SEED: home a on an 8 MiB tmpfs. b pushes N items with its agent while a's disk is filled;
# adds on a while full; compaction while full; then free the space and check: every add reported ok is on a
# and b, doctor true, digests equal. Unmounts the tmpfs at the end.
. $(dirname $(readlink -f $0))/common.sh
SEED=${1:-1}; RANDOM=$SEED; echo seed=$SEED
D=$W/f1; rm -rf $D; mkdir -p $D/mnt
mount -t tmpfs -o size=8m tmpfs $D/mnt || exit 1
trap 'stopall; kill -TERM $AP 2>/dev/null; wait $AP 2>/dev/null; umount $D/mnt' EXIT
mkhome $D/mnt/a a; mkhome $D/b b
pl $D/mnt/a pair --trust $(pl $D/b id | tail -1) --address 127.0.0.1:18131 >/dev/null
pl $D/b pair --trust $(pl $D/mnt/a id | tail -1) --address 127.0.0.1:18130 >/dev/null
A=$D/mnt/a; ok=$D/ok; : > $ok
pl $A list add L >/dev/null; pl $A add L first >/dev/null && echo first >> $ok
pl $D/b list add M >/dev/null
# b: many items
( for i in $(seq 1 3000); do echo "add M b-$i-$(head -c 200 /dev/zero | tr '\0' x)"; done ) | pl $D/b batch >/dev/null
agent $D/b 18131; BP=$AGENT_PID
# fill a's disk, leaving K kB
K=${2:-$((RANDOM % 1500 + 50))}; echo "leaving ${K} kB"
avail=$(df -k --output=avail $D/mnt | tail -1); dd if=/dev/zero of=$D/mnt/filler bs=1k count=$((avail - K)) 2>/dev/null
df -k $D/mnt | tail -1
for i in $(seq 1 30); do out=$(pl $A add L "a-$i" 2>&1); rc=$?; [ $rc = 0 ] && echo "a-$i" >> $ok; [ $i -le 2 -o $rc != 0 ] && echo "add a-$i rc=$rc: $out" | head -2; [ $rc != 0 ] && break; done
echo "--- sync while full"; pl $A sync --no-discovery 2>&1 | cut -c1-300; echo "rc=${PIPESTATUS[0]}"
echo "--- add after sync"; pl $A add L after-sync 2>&1 && echo after-sync >> $ok
echo "--- compact while full"; pl $A compact 2>&1 | cut -c1-300
echo "--- status while full"; pl $A status 2>&1 | tail -3
echo "--- doctor while full"; pl $A doctor 2>&1 | grep -v '^  ok' | cut -c1-300
echo "--- agent while full (5 s)"; $P agent --home $A --config $A/config.toml --no-discovery --listen 127.0.0.1:18130 > $D/a-agent.log 2>&1 & AP=$!; sleep 2; pl $A add L via-agent 2>&1 && echo via-agent >> $ok; sleep 3; stopagent $AP; grep -E "error|warn" $D/a-agent.log | cut -c1-300 | sort | uniq -c | head
ls -la $A; df -k $D/mnt | tail -1
echo "--- free space"; rm $D/mnt/filler
pl $A sync --no-discovery 2>&1 | cut -c1-300
pl $A add L after-free && echo after-free >> $ok
pl $A sync --no-discovery 2>&1 | cut -c1-300
pl $A compact | cut -c1-200
for h in $A $D/b; do items $h > $h.items; echo "$(basename $h): items=$(wc -l < $h.items) dups=$(sort $h.items | uniq -d | wc -l) missing=$(sort $ok | comm -23 - <(sort -u $h.items) | tr '\n' ' ')"
  pl $h status | grep digest; pl $h doctor 2>&1 | grep -v '^  ok' | grep -v 'peer device\|unreachable\|→ start' | cut -c1-300; done
stopagent $BP
