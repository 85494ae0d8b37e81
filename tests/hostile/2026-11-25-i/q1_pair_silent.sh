#!/bin/bash
# q1_pair_silent.sh: `plait pair --connect` to addresses that accept and stay silent / drip / close / never accept.
. $(dirname $(readlink -f $0))/common.sh
D=$W/q1; rm -rf $D; mkdir -p $D; mkhome $D/a a
for m in silent drip close backlog; do
  python3 $(dirname $0)/q1_pair_silent.py 18250 $m & SP=$!; sleep 0.5
  echo "--- $m"; s=$(date +%s.%N); timeout 150 $P pair --connect 127.0.0.1:18250 --home $D/a --config $D/a/config.toml </dev/null 2>&1 | cut -c1-300; echo "rc=${PIPESTATUS[0]} after $(echo "$(date +%s.%N) - $s" | bc | cut -c1-5) s"
  kill $SP; wait $SP 2>/dev/null
done
