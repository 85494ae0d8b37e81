#!/bin/bash
# d1_doctor_probe_log.sh: `plait doctor` on a checks its paired peer b (whose agent runs); what b's agent logs.
. $(dirname $(readlink -f $0))/common.sh
D=$W/d1; setup $D 18111 a b
agent $D/b 18112; BP=$AGENT_PID; sleep 1; n=$(wc -l < $D/b.log)
pl $D/a doctor | grep 'peer device'
sleep 0.5; echo "--- b's log:"; tail -n +$((n+1)) $D/b.log | cut -d' ' -f2- | cut -c1-400
stopagent $BP
