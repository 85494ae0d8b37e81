#!/bin/bash
# w2_owner_typo.sh: as w1 (netns h8w, agent's HTTPS API on 10.88.0.1:18261), 30 attacker addresses exhaust the
# global budget; the owner mistypes once, reads Retry-After, and comes back exactly then with the right password,
# while the attacker sends one guess from a fresh address every 60 s. Does the owner get in when told to?
. $(dirname $(readlink -f $0))/common.sh
NSRC=30; D=$W/w2; rm -rf $D; mkdir -p $D; mkhome $D/a a
printf '[api]\nlisten = "10.88.0.1:18261"\n[discovery]\nenabled = false\n' > $D/a/config.toml
printf 'correct-horse-9\n' | pl $D/a gui --set-password >/dev/null
NS=h8w; ip netns del $NS 2>/dev/null; ip netns add $NS; ip link add h8w-host type veth peer name h8w-ns; ip link set h8w-ns netns $NS
ip -n $NS addr add 10.88.0.1/24 dev h8w-ns; ip -n $NS link set h8w-ns up; ip -n $NS link set lo up
ip link set h8w-host up; for i in $(seq 11 60) 201; do ip addr add 10.88.0.$i/24 dev h8w-host; done
cleanup() { kill -TERM $AP 2>/dev/null; wait $AP 2>/dev/null; ip link del h8w-host 2>/dev/null; ip netns del $NS; }
trap cleanup EXIT
ip netns exec $NS $P agent --home $D/a --config $D/a/config.toml --no-discovery --listen 127.0.0.1:18260 >> $D/a.log 2>&1 & AP=$!
sleep 3
login() { curl -sk -D $D/hdr -o $D/body -w '%{http_code}' --interface $1 -H 'Host: 10.88.0.1:18261' -H 'Origin: https://10.88.0.1:18261' -H 'Content-Type: application/json' -d "{\"password\": \"$2\"}" https://10.88.0.1:18261/api/session; }
for i in $(seq 11 40); do for k in 1 2 3 4; do login 10.88.0.$i g$i$k >/dev/null; done; done
echo "owner typo: $(login 10.88.0.201 typo)"; echo "owner right: $(login 10.88.0.201 correct-horse-9) retry-after=$(grep -i retry-after $D/hdr | tr -d '\r') body=$(cut -c1-200 $D/body)"
RA=$(grep -i retry-after $D/hdr | tr -dc 0-9); start=$(date +%s); next=41
for t in 1; do
  end=$((start+RA+1)); while [ $(date +%s) -lt $end ]; do sleep 60; echo "  t=$(( $(date +%s)-start ))s attacker fresh 10.88.0.$next: $(login 10.88.0.$next guess$next)"; next=$((next+1)); done
  echo "t=$(( $(date +%s)-start ))s owner right (as Retry-After said): $(login 10.88.0.201 correct-horse-9) retry-after=$(grep -i retry-after $D/hdr | tr -d '\r')"
  RA=$(grep -i retry-after $D/hdr | tr -dc 0-9); [ -z "$RA" ] && break; start=$(date +%s)
done
