#!/bin/bash
# w1_password_brake.sh: the agent's API on 10.88.0.1:18261 (HTTPS, password) inside netns h8w; an attacker with
# NSRC addresses (10.88.0.10+i on the host side of the veth) guesses; the owner (10.88.0.200) signs in.
# Counts the guesses actually checked (401) and the 429s; then the owner with no failure, and with one typo.
. $(dirname $(readlink -f $0))/common.sh
NSRC=${1:-30}; D=$W/w1; rm -rf $D; mkdir -p $D; mkhome $D/a a
printf '[api]\nlisten = "10.88.0.1:18261"\n[discovery]\nenabled = false\n' > $D/a/config.toml
printf 'correct-horse-9\n' | pl $D/a gui --set-password >/dev/null
NS=h8w; ip netns del $NS 2>/dev/null; ip netns add $NS; ip link add h8w-host type veth peer name h8w-ns; ip link set h8w-ns netns $NS
ip -n $NS addr add 10.88.0.1/24 dev h8w-ns; ip -n $NS link set h8w-ns up; ip -n $NS link set lo up
ip link set h8w-host up; for i in $(seq 1 $((NSRC+10))) 190 191; do ip addr add 10.88.0.$((10+i))/24 dev h8w-host; done
cleanup() { kill -TERM $AP 2>/dev/null; wait $AP 2>/dev/null; ip link del h8w-host 2>/dev/null; ip netns del $NS; }
trap cleanup EXIT
ip netns exec $NS $P agent --home $D/a --config $D/a/config.toml --no-discovery --listen 127.0.0.1:18260 >> $D/a.log 2>&1 & AP=$!
sleep 3; grep -E 'API|api' $D/a.log | cut -c1-200 | head -3
login() { curl -sk -o /dev/null -w '%{http_code}' --interface $1 -H 'Host: 10.88.0.1:18261' -H 'Origin: https://10.88.0.1:18261' -H 'Content-Type: application/json' -d "{\"password\": \"$2\"}" https://10.88.0.1:18261/api/session; }
echo "--- owner, no failure yet: $(login 10.88.0.200 correct-horse-9)"
checked=0; t429=0
for round in 1 2 3; do for i in $(seq 1 $NSRC); do for k in 1 2 3 4; do
  c=$(login 10.88.0.$((10+i)) guess$round$i$k); [ $c = 401 ] && checked=$((checked+1)); [ $c = 429 ] && t429=$((t429+1))
done; done; echo "after round $round: guesses checked $checked, refused 429: $t429"; done
echo "--- owner (no failure of its own) during the attack: $(login 10.88.0.200 correct-horse-9)"
echo "--- owner from another address mistypes once: $(login 10.88.0.201 wrong-typo) then right: $(login 10.88.0.201 correct-horse-9)"
for w in 5 30 120; do sleep $w; echo "--- owner (one typo) $w s later, right: $(login 10.88.0.201 correct-horse-9); attacker keeps trying fresh addresses: $(login 10.88.0.$((NSRC+12)) g$w)"; done
echo "--- attacker source 1 after its back-off: $(login 10.88.0.11 x)"
echo "--- a log (wrong-password notices): $(grep -c 'wrong password' $D/a.log)"
