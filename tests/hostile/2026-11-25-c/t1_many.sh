#!/bin/bash
# Area 1: N hostile initiators (each its own home) dial one `plait pair --listen` at once, each sending its nonce and
# a yes; the victim's user answers y after 1 s. Exactly one device may be stored: the one whose ID and code were shown.
# usage: t1_many.sh N
P=${PLAIT:-/tmp/hostile/plait}; B=/tmp/hostile2/m; D=$(dirname $(readlink -f $0)); N=${1:-10}
rm -rf $B; mkdir -p $B; $P init --home $B/V --name victim >/dev/null
for i in $(seq 1 $N); do $P init --home $B/H$i --name "hostile$i" >/dev/null; done
mkfifo $B/in; $P pair --listen 127.0.0.1:17645 --home $B/V --timeout 15 < $B/in > $B/v.out 2>&1 & VP=$!
( sleep 1.5; echo y; sleep 16 ) > $B/in & EP=$!
sleep 0.3; PIDS=""
for i in $(seq 1 $N); do timeout 30 python3 $D/hpair.py init $B/H$i 17645 read,nonce,read,yes,read,wait:3 > $B/h$i.out 2>&1 & PIDS="$PIDS $!"; done
wait $VP; echo "victim rc=$?"; kill $EP; wait $EP 2>/dev/null; wait $PIDS
cat $B/v.out; echo "--- stored:"; $P peers --home $B/V
for i in $(seq 1 $N); do echo "H$i ($($P id --home $B/H$i | tail -1 | cut -c1-7)): $(grep -c '<-' $B/h$i.out) frames; $(grep ended $B/h$i.out)"; done
