#!/bin/bash
# f3_full_misc.sh K: home a (2,000 items) on an 8 MiB tmpfs filled to K kB free; then `rejoin`, `pair --trust`,
# `batch` of 500, `repair`, `compact`, each checked: on error, does the store's summary/digest stay as it was
# ("nothing was changed")? Then space is freed and a syncs with b: convergence, doctor.
. $(dirname $(readlink -f $0))/common.sh
K=${1:-100}; D=$W/f3; rm -rf $D; mkdir -p $D/mnt
mount -t tmpfs -o size=8m tmpfs $D/mnt || exit 1; trap 'stopall; kill -TERM $AP 2>/dev/null; wait $AP 2>/dev/null; umount $D/mnt' EXIT
A=$D/mnt/a; mkhome $A a; mkhome $D/b b; mkhome $D/c c
pl $A pair --trust $(pl $D/b id | tail -1) --address 127.0.0.1:18106 >/dev/null
pl $D/b pair --trust $(pl $A id | tail -1) --address 127.0.0.1:18105 >/dev/null
pl $A list add L >/dev/null; ( for i in $(seq 1 2000); do echo "add L item-$i"; done ) | pl $A batch >/dev/null
avail=$(df -k --output=avail $D/mnt | tail -1); dd if=/dev/zero of=$D/mnt/filler bs=1k count=$((avail - K)) 2>/dev/null
echo "free: $(df -k --output=avail $D/mnt | tail -1) kB"
st() { pl $A status 2>/dev/null | grep -E 'summary|digest|changes' | md5sum | cut -c1-8; }
try() { local before=$(st); out=$(pl $A "$@" 2>&1 </dev/null); rc=$?; local after=$(st)
  echo "$* -> rc=$rc state $([ $before = $after ] && echo unchanged || echo CHANGED): $(echo "$out" | tail -1 | cut -c1-200)"; }
try rejoin
try pair --trust $(pl $D/c id | tail -1)
echo "c paired? $(pl $A peers 2>/dev/null | grep -c ' c \| c$\|^c ')"
try batch < <(for i in $(seq 1 500); do echo "add L more-$i"; done)
( for i in $(seq 1 500); do echo "add L more-$i"; done ) > $D/batch.in
before=$(st); out=$(pl $A batch < $D/batch.in 2>&1); rc=$?; echo "batch 500 -> rc=$rc state $([ $before = $(st) ] && echo unchanged || echo CHANGED): $(echo "$out" | tail -1 | cut -c1-200)"
try repair
try compact
try list add M
rm $D/mnt/filler
agent $D/b 18106; BP=$AGENT_PID; sleep 0.5
pl $A sync --no-discovery 2>&1 | cut -c1-200; pl $A sync --no-discovery 2>&1 | cut -c1-200
for h in $A $D/b; do echo "$(basename $h): $(pl $h status | grep -E 'data') $(pl $h status | grep digest)"; pl $h doctor 2>&1 | grep -E 'FAIL|WARN' | grep -v 'peer device' | cut -c1-200; done
stopagent $BP
