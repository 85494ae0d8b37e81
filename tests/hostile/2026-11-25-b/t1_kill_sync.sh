#!/bin/bash
# SIGKILL `plait sync` on victim V (fresh copy of k/V0) at seeded random moments while it pulls S's 60k-change baseline.
# usage: t1_kill_sync.sh SEED TRIALS   (needs k/ from README step; S agent on 17500 must be running)
P=${PLAIT:-/tmp/hostile/plait}; W=/tmp/hostile/t2/k; SEED=${1:-1}; TR=${2:-10}
echo "seed $SEED"; RANDOM=$SEED
SREF=$($P show --json --home $W/S | sha256sum | cut -c1-16)
EMPTY=$($P show --json --home $W/V0 | sha256sum | cut -c1-16)
chk() { # $1 label
  local V=$1
  local doc=$($P doctor --home $V --listen 127.0.0.1:17502 2>&1 | grep -E '^  (ok|WARN|FAIL) +(store|baseline|materialized|hash chains)')
  local ic=$(sqlite3 $V/plait.db "PRAGMA integrity_check" 2>&1 | head -1)
  local sh=$($P show --json --home $V 2>&1 | sha256sum | cut -c1-16)
  local st=$(sqlite3 $V/plait.db "select count(*) from staged_baseline_chunks" 2>&1)
  local cls=other; [ $sh = $SREF ] && cls=FULL; [ $sh = $EMPTY ] && cls=empty
  local bad=$(echo "$doc" | grep -c FAIL)
  echo "   integrity=$ic state=$cls staged_chunks=$st doctorFAIL=$bad $($P status --home $V | awk '/^changes/{print $2, $5, $6}')"
  [ $bad -gt 0 ] && echo "$doc" | sed 's/^/      /'
  [ "$ic" != ok ] && echo "   !!! integrity_check: $ic"
}
for t in $(seq 1 $TR); do
  V=$W/Vt; rm -rf $V; cp -a $W/V0 $V
  K=$((1 + RANDOM % 3)); echo "trial $t: $K kills"
  for k in $(seq 1 $K); do
    d=$(printf "0.%03d" $((RANDOM % 1000))); d=$(echo "$d * ${DMAX:-1.8}" | bc -l | cut -c1-5)
    $P sync --home $V --peer 127.0.0.1:17500 --no-discovery > $W/sync.out 2>&1 & SP=$!
    sleep $d; if kill -9 $SP 2>/dev/null; then echo "  killed at ${d}s"; else echo "  (sync finished before ${d}s: $(cat $W/sync.out | tail -1))"; fi
    wait $SP 2>/dev/null
    chk $V
  done
  out=$($P sync --home $V --peer 127.0.0.1:17500 --no-discovery 2>&1); rc=$?
  echo "  final sync rc=$rc: $out"
  chk $V
done
