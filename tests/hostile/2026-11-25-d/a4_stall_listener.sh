#!/bin/bash
# A/fix 4 (after t1_stall_listener.sh of 2026-11-25-c): N silent TCP connections (no ClientHello) to
# `plait pair --listen`, then an honest `plait pair --connect --timeout 40` (both users answer y). usage: N [SRC]
# SRC: "same" (default: the silent ones from 127.0.0.1 like the honest device) or "many" (127.0.1.i, one each)
. $(dirname $(readlink -f $0))/common.sh; B=$W/a4; N=${1:-8}; SRC=${2:-same}
rm -rf $B; mkdir -p $B; mkhome $B/V victim; mkhome $B/F friend; mkfifo $B/inv $B/inf
$P pair --listen 127.0.0.1:17820 --home $B/V --config $B/V/config.toml --timeout 60 < $B/inv > $B/v.out 2>&1 & VP=$!
( sleep 1; for i in $(seq 1 60); do echo y; sleep 1; done ) > $B/inv & E1=$!
sleep 0.3
python3 - $N $SRC <<'PY' &
import socket, sys, time
n = int(sys.argv[1]); socks = []
for i in range(n):
    s = socket.socket()
    if sys.argv[2] == "many": s.bind((f"127.0.1.{i % 250 + 1}", 0))
    s.connect(("127.0.0.1", 17820)); socks.append(s)
time.sleep(70)
PY
SP=$!
sleep 0.3; T0=$(date +%s.%N)
$P pair --connect 127.0.0.1:17820 --home $B/F --config $B/F/config.toml --timeout 40 < $B/inf > $B/f.out 2>&1 & FP=$!
( for i in $(seq 1 45); do echo y; sleep 1; done ) > $B/inf & E2=$!
wait $FP; FRC=$?; T1=$(date +%s.%N)
echo "friend: rc=$FRC after $(echo "$T1 - $T0" | bc) s"; grep -v "^this device" $B/f.out
kill $SP; wait $SP 2>/dev/null; wait $VP; echo "victim rc=$?"; grep -v "^this device\|^on the other" $B/v.out
kill $E1 $E2 2>/dev/null; wait $E1 $E2 2>/dev/null
echo "--- victim peers:"; $P peers --home $B/V
