#!/bin/bash
# s14 [RUNS]: a realistic race: on a fresh cp -a copy the agent starts and a CLI `add` runs at the same moment
# (e.g. agent started at login while the user adds). Expect one new timeline.
. /tmp/hostile11/scripts/common.sh
R=${1:-10}; D=$W/s14; rm -rf $D; mkdir -p $D; mkhome $D/o o; pl $D/o list add L >/dev/null; pl $D/o add L x >/dev/null
extra=0
for r in $(seq 1 $R); do rm -rf $D/c $D/c.log; cp -a $D/o $D/c
  $P agent --home $D/c --config $D/c/config.toml --no-discovery --listen 127.0.0.1:18790 >>$D/c.log 2>&1 & ap=$!
  sleep 0.0$((RANDOM % 10)); pl $D/c add L u$r >$D/add.out 2>&1; sleep 1; kill -TERM $ap; wait $ap
  n=$(pl $D/c status --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["summary"].split(",")))')
  [ $n -gt 2 ] && extra=$((extra+1))
  echo "run $r: timelines=$n notes agent/cli=$(grep -c 'not the one it was last' $D/c.log)/$(grep -c '^note' $D/add.out)"
done; echo "runs with an extra timeline: $extra of $R"
