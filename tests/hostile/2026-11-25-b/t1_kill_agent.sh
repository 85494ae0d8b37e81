#!/bin/bash
# SIGKILL a pulling `plait agent` on victim V (fresh copy of k/V0) at seeded random moments during baseline pull/adoption.
# usage: t1_kill_agent.sh SEED TRIALS   (S agent on 17500 running)
P=${PLAIT:-/tmp/hostile/plait}; W=/tmp/hostile/t2/k; SEED=${1:-1}; TR=${2:-5}; echo "seed $SEED"; RANDOM=$SEED
SREF=$($P show --json --home $W/S | sha256sum | cut -c1-16)
for t in $(seq 1 $TR); do
  V=$W/Va; rm -rf $V; cp -a $W/V0 $V
  for k in 1 2; do
    d=$(echo "0.$(printf %03d $((RANDOM % 1000))) * 2.5" | bc -l | cut -c1-5)
    $P agent --home $V --listen 127.0.0.1:17502 --peer 127.0.0.1:17500 --no-discovery --api-listen "" > $W/Va.log 2>&1 & AP=$!
    sleep $d; kill -9 $AP; wait $AP 2>/dev/null
    doc=$($P doctor --home $V --listen 127.0.0.1:17502 2>&1 | grep -E '^  (ok|WARN|FAIL) +(store|baseline|materialized|hash chains)' | grep -c FAIL)
    echo "trial $t kill $k at ${d}s: integrity=$(sqlite3 $V/plait.db 'PRAGMA integrity_check' | head -1) doctorFAIL=$doc $($P status --home $V | awk '/^changes/')"
  done
  $P agent --home $V --listen 127.0.0.1:17502 --peer 127.0.0.1:17500 --no-discovery --api-listen "" > $W/Va.log 2>&1 & AP=$!
  for i in $(seq 1 30); do sleep 1; [ "$($P show --json --home $V | sha256sum | cut -c1-16)" = $SREF ] && break; done
  kill $AP; wait $AP 2>/dev/null
  echo "trial $t: after restart, equal to S: $([ "$($P show --json --home $V | sha256sum | cut -c1-16)" = $SREF ] && echo yes || echo NO) (${i}s); doctorFAIL=$($P doctor --home $V --listen 127.0.0.1:17502 2>&1 | grep -E '^  (ok|WARN|FAIL) +(store|baseline|materialized|hash chains)' | grep -c FAIL)"
done
