#!/bin/bash
# C: two paired agents started at the same instant, CYCLES times (they dial each other at once; one connection is
# dropped by the rule of PROTOCOL.md §13.5). Does either log "refused this device" or `plait peers` say
# "refuses this device" although both are paired? usage: b8_simultaneous.sh [CYCLES]
. $(dirname $(readlink -f $0))/common.sh; D=$W/b8; N=${1:-10}
setup $D 17896 A B; $P list add L --home $D/A >/dev/null
bad=0
for i in $(seq 1 $N); do
  agent $D/A 17896; AP=$AGENT_PID; agent $D/B 17897; BP=$AGENT_PID; sleep 2.5
  a=$($P peers --home $D/A | grep -c "refuses"); b=$($P peers --home $D/B | grep -c "refuses")
  [ $a$b != 00 ] && { bad=$((bad+1)); echo "cycle $i: A peers refuses=$a, B peers refuses=$b"; }
  kill $AP $BP; wait $AP $BP 2>/dev/null
done
echo "cycles with a false 'refuses this device' in peers: $bad of $N"
echo "log lines 'refused this device': A $(grep -c 'refused this device' $D/A.log), B $(grep -c 'refused this device' $D/B.log)"
grep -h "refused this device\|ended:" $D/A.log $D/B.log | cut -c1-200 | sort | uniq -c | sort -rn | head -8
