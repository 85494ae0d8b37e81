#!/bin/bash
# k3_kill_pair.sh SEED [ROUNDS]: `plait pair --listen` (a) and `--connect` (b), one side SIGKILLed after a random
# delay; then what each side's `peers` says, whether pairing again works, and whether a sync then succeeds.
. $(dirname $(readlink -f $0))/common.sh
SEED=${1:-1}; R=${2:-6}; RANDOM=$SEED; echo "seed=$SEED"
for r in $(seq 1 $R); do
  D=$W/k3; rm -rf $D; mkdir -p $D; mkhome $D/a a; mkhome $D/b b
  d=$((RANDOM % 150)); side=$((RANDOM % 2))
  (echo y | exec $P pair --listen 127.0.0.1:18192 --timeout 8 --home $D/a --config $D/a/config.toml > $D/la 2>&1) & LA=$!
  sleep 0.3
  (echo y | exec $P pair --connect 127.0.0.1:18192 --address 127.0.0.1:18193 --timeout 8 --home $D/b --config $D/b/config.toml > $D/lb 2>&1) & LB=$!
  sleep $(printf '0.%03d' $d)
  if [ $side = 0 ]; then pkill -KILL -P $LA 2>/dev/null; kill -KILL $LA 2>/dev/null; else pkill -KILL -P $LB 2>/dev/null; kill -KILL $LB 2>/dev/null; fi
  wait $LA; ra=$?; wait $LB; rb=$?
  pa=$(pl $D/a peers 2>&1 | cut -c1-12 | tr "\n" ";"); pb=$(pl $D/b peers 2>&1 | cut -c1-12 | tr "\n" ";")
  echo "round $r: killed $([ $side = 0 ] && echo a || echo b) after ${d}ms: a rc=$ra peers=$pa, b rc=$rb peers=$pb; b said: $(tail -1 $D/lb | cut -c1-160)"
  # pair again, then sync
  (echo y | exec $P pair --listen 127.0.0.1:18192 --timeout 8 --home $D/a --config $D/a/config.toml > $D/la2 2>&1) & LA=$!; sleep 0.3
  echo y | $P pair --connect 127.0.0.1:18192 --address 127.0.0.1:18193 --timeout 8 --home $D/b --config $D/b/config.toml > $D/lb2 2>&1; rb=$?; wait $LA; ra=$?
  [ $ra = 0 -a $rb = 0 ] || { echo "  pair again: a rc=$ra b rc=$rb"; tail -2 $D/la2 $D/lb2 | cut -c1-200; }
  agent $D/a 18193; AP=$AGENT_PID; sleep 0.7; pl $D/b add L x >/dev/null 2>&1; pl $D/b list add L >/dev/null; pl $D/b add L x >/dev/null
  out=$(pl $D/b sync --no-discovery 2>&1); [ $? = 0 ] || echo "  sync failed: $out" | cut -c1-250
  pl $D/a peers 2>&1 | grep -c . | sed 's/^/  a peers lines: /'; stopagent $AP
done
