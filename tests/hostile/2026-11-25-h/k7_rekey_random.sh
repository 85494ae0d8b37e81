#!/bin/bash
# k7_rekey_random.sh SEED [ROUNDS]: plain random SIGKILLs (no strace) of `plait rejoin --new-key` on a home of 3,000
# items; after each: did the kill land between the key swap and the store's new timeline (Device ID changed, own
# timeline unchanged)? If so, the edit made next is checked at b (as in H2).
. $(dirname $(readlink -f $0))/common.sh
SEED=${1:-1}; R=${2:-6}; RANDOM=$SEED; echo "seed=$SEED"
D=$W/k7; setup $D 18136 a b; A=$D/a
pl $A list add L >/dev/null; ( for i in $(seq 1 3000); do echo "add L item-$i"; done ) | pl $A batch >/dev/null
rm -rf $D/good; cp -a $A $D/good
start=$(date +%s%N); pl $A rejoin --new-key >/dev/null; echo "a whole rejoin --new-key takes $(( ($(date +%s%N)-start)/1000000 )) ms"
for r in $(seq 1 $R); do
  rm -rf $A; cp -a $D/good $A
  id0=$(pl $A id | tail -1); tl0=$(pl $A status | awk '/^timeline/{print $2}')
  d=$((RANDOM % 90 + 10))
  $P rejoin --new-key --home $A --config $A/config.toml > /dev/null 2>&1 & p=$!; sleep $(printf '0.%03d' $d); kill -KILL $p 2>/dev/null; wait $p; rc=$?
  id1=$(pl $A id 2>/dev/null | tail -1); tl1=$(pl $A status 2>/dev/null | awk '/^timeline/{print $2}')
  state="clean"; [ "$id1" != "$id0" -a "$tl1" = "$tl0" ] && state="HALF (new key, old timeline)"; [ -z "$id1" ] && state="NO KEY"
  echo "round $r: killed after ${d} ms (rc=$rc): $state"
done
