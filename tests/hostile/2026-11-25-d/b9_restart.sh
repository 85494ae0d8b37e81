#!/bin/bash
# C: Y's agent runs; X's agent is stopped (SIGTERM) and started again CYCLES times (a restart, a reboot). Does Y ever
# log "refused this device" or show X as "refuses this device" though X never unpaired it? usage: b9_restart.sh [CYCLES] [UP]
. $(dirname $(readlink -f $0))/common.sh; D=$W/b9; N=${1:-10}; UP=${2:-1}
setup $D 17898 X Y; $P list add L --home $D/X >/dev/null
agent $D/Y 17899; YP=$AGENT_PID; bad=0
for i in $(seq 1 $N); do
  agent $D/X 17898; XP=$AGENT_PID; sleep $UP; kill $XP; wait $XP 2>/dev/null; sleep 0.3
  $P peers --home $D/Y | grep -q refuses && { bad=$((bad+1)); echo "cycle $i: Y peers: $($P peers --home $D/Y | grep -o 'refuses.*')"; }
done
agent $D/X 17898; XP=$AGENT_PID; sleep 3
echo "cycles after which Y's peers said 'refuses this device': $bad of $N; now: $($P peers --home $D/Y | awk '{print $NF, $(NF-1)}')"
echo "Y log 'refused this device' lines: $(grep -c 'refused this device' $D/Y.log)"; grep "refused this device" $D/Y.log | cut -c1-160 | head -3
kill $XP $YP; wait $XP $YP 2>/dev/null
