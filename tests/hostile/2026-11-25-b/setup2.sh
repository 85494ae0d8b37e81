#!/bin/bash
# usage: setup2.sh DIR BASEPORT NAME... -> homes DIR/NAME, all pairwise paired; port of the i-th name = BASEPORT+i
set -e
P=${PLAIT:-/tmp/hostile/plait}
D=$1; B=$2; shift 2
rm -rf $D; mkdir -p $D
declare -A port; i=0
for n in "$@"; do $P init --home $D/$n --name $n >/dev/null; port[$n]=$((B+i)); i=$((i+1)); done
for x in "$@"; do for y in "$@"; do
  [ $x = $y ] && continue
  $P pair --trust $($P id --home $D/$y | tail -1) --address 127.0.0.1:${port[$y]} --home $D/$x >/dev/null
done; done
for n in "$@"; do echo "$n ${port[$n]}"; done > $D/ports
echo ok
