#!/bin/bash
# usage: setup.sh DIR  -> homes DIR/A DIR/C DIR/H (+DIR/D), all pairwise paired; ports A 17401, C 17402, D 17404
set -e
P=${PLAIT:-/tmp/hostile/plait}
D=${1:-/tmp/hostile/w}
rm -rf $D; mkdir -p $D
for n in A C H D; do $P init --home $D/$n --name $n >/dev/null; done
declare -A port=([A]=17401 [C]=17402 [H]=17403 [D]=17404)
for x in A C H D; do for y in A C H D; do
  [ $x = $y ] && continue
  $P pair --trust $($P id --home $D/$y | tail -1) --address 127.0.0.1:${port[$y]} --home $D/$x >/dev/null
done; done
echo ok
