#!/bin/bash
# usage: t1_certname.sh CASE  (zalgo | weird | long | rsa): pair a stranger with that certificate name; print what is stored
P=${PLAIT:-/tmp/hostile/plait}; B=/tmp/hostile2/p; D=$(dirname $(readlink -f $0))
rm -rf $B; mkdir -p $B; python3 $D/t1_certname.py $B/S $1 2>/dev/null
$P init --home $B/V --name victim >/dev/null; mkfifo $B/in
$P pair --listen 127.0.0.1:17640 --home $B/V --timeout 10 < $B/in > $B/v.out 2>&1 & VP=$!
( sleep 1; echo y; sleep 3 ) > $B/in & EP=$!
sleep 0.3; timeout 20 python3 $D/hpair.py init $B/S 17640 read,nonce,read,yes,read > /dev/null 2>&1
wait $VP; echo "pair rc=$?"; kill $EP 2>/dev/null; wait $EP 2>/dev/null
$P peers --home $B/V --json | python3 -c "import json,sys; p=json.load(sys.stdin)['peers'][0]; print('stored name:', repr(p['name'][:40]), '...', len(p['name']), 'code points,', len(p['name'].encode()), 'bytes')"
