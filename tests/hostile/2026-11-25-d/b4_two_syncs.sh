#!/bin/bash
# B/C: two `plait sync` runs of one home Y at once (no agent on Y: each process draws its own instance nonce) against
# X's agent. Does X's agent take them for a copied home ("run `plait rejoin --new-key`"), and stop either?
# usage: b4_two_syncs.sh [N] [BIG]   N concurrent syncs (2), BIG changes on X (20000: each sync lasts ~2 s)
. $(dirname $(readlink -f $0))/common.sh; D=$W/b4; N=${1:-2}; BIG=${2:-20000}
setup $D 17860 X Y
( echo "list add Big"; for i in $(seq 1 $BIG); do echo "add Big \"item $i\""; done ) | $P batch --home $D/X >/dev/null
agent $D/X 17860; XP=$AGENT_PID; sleep 1
pids=""; for i in $(seq 1 $N); do $P sync --home $D/Y --config $D/Y/config.toml --peer 127.0.0.1:17860 --timeout 30 > $D/s$i.out 2>&1 & pids="$pids $!"; sleep 0.2; done
wait $pids
echo "--- sync outputs:"; for i in $(seq 1 $N); do cut -c1-200 $D/s$i.out; done
echo "--- X log (copied / replaced / stopped):"; grep -i "copied\|replaced\|stopp\|ended" $D/X.log | cut -c1-230
echo "--- X peers:"; $P peers --home $D/X | cut -c1-200
echo "--- X doctor (FAIL lines):"; $P doctor --home $D/X --config $D/X/config.toml | grep FAIL | cut -c1-260
kill $XP; wait $XP 2>/dev/null
echo "--- X peers after its agent stopped:"; $P peers --home $D/X | cut -c1-200
