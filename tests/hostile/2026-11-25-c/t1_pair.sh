#!/bin/bash
# Area 1: a hostile, unpaired party against `plait pair --listen` (victim V answers ANSWER to the code question,
# typed after ANSWER_DELAY s) or `plait pair --connect` (hostile listens).
# usage: t1_pair.sh listen  SCRIPT [ANSWER] [ANSWER_DELAY]   hostile = initiator, dials V's pair --listen on 17640
#        t1_pair.sh connect SCRIPT [ANSWER] [ANSWER_DELAY]   hostile = responder on 17641, V runs pair --connect
P=${PLAIT:-/tmp/hostile/plait}; B=/tmp/hostile2/p; D=$(dirname $(readlink -f $0))
MODE=$1; SCRIPT=$2; ANSWER=${3:-y}; AD=${4:-1}
rm -rf $B; mkdir -p $B
$P init --home $B/V --name victim >/dev/null; $P init --home $B/H --name hostile >/dev/null
if [ $MODE = listen ]; then
  mkfifo $B/in; $P pair --listen 127.0.0.1:17640 --home $B/V --timeout 15 < $B/in > $B/v.out 2>&1 & VP=$!
  ( sleep $AD; echo "$ANSWER"; sleep 16 ) > $B/in & AP=$!
  sleep 0.5
  timeout 40 python3 $D/hpair.py init $B/H 17640 "$SCRIPT"
else
  timeout 40 python3 $D/hpair.py resp $B/H 17641 $B/V "$SCRIPT" & HP=$!
  sleep 0.5
  mkfifo $B/in; $P pair --connect 127.0.0.1:17641 --home $B/V --timeout 15 < $B/in > $B/v.out 2>&1 & VP=$!
  ( sleep $AD; echo "$ANSWER"; sleep 16 ) > $B/in & AP=$!
  wait $HP
fi
wait $VP; RC=$?; kill $AP 2>/dev/null; wait $AP 2>/dev/null
echo "--- victim (rc=$RC):"; cat $B/v.out
echo "--- victim peers:"; $P peers --home $B/V; $P peers --pending --home $B/V
