#!/bin/bash
# Area 1: a stranger holds N silent TCP connections to `plait pair --listen` (no TLS ClientHello), then an honest
# `plait pair --connect` from another home tries to pair (both users answer y). usage: t1_stall_listener.sh N
P=${PLAIT:-/tmp/hostile/plait}; B=/tmp/hostile2/s; N=${1:-8}
rm -rf $B; mkdir -p $B; $P init --home $B/V --name victim >/dev/null; $P init --home $B/F --name friend >/dev/null
mkfifo $B/inv $B/inf
$P pair --listen 127.0.0.1:17647 --home $B/V --timeout 60 < $B/inv > $B/v.out 2>&1 & VP=$!
( sleep 1; for i in $(seq 1 60); do echo y; sleep 1; done ) > $B/inv & E1=$!
sleep 0.3
python3 - $N <<'PY' &
import socket, sys, time
n = int(sys.argv[1]); socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", 17647)); socks.append(s)
time.sleep(70)
PY
SP=$!
sleep 0.3; T0=$(date +%s.%N)
$P pair --connect 127.0.0.1:17647 --home $B/F --timeout 40 < $B/inf > $B/f.out 2>&1 & FP=$!
( for i in $(seq 1 45); do echo y; sleep 1; done ) > $B/inf & E2=$!
wait $FP; FRC=$?; T1=$(date +%s.%N)
echo "friend: rc=$FRC after $(echo "$T1 - $T0" | bc) s"; cat $B/f.out | grep -v "^this device"
kill $SP; wait $SP 2>/dev/null; wait $VP; echo "victim rc=$?"; grep -v "^this device\|^on the other" $B/v.out
kill $E1 $E2 2>/dev/null; wait $E1 $E2 2>/dev/null
echo "--- victim peers:"; $P peers --home $B/V
