#!/bin/bash
# s1_stopped_agent.sh: a's agent is frozen (SIGSTOP: a debugger, a suspended job) while `plait add` runs through its
# socket; the add gives up after its 60 s answer timeout; then the agent is resumed (SIGCONT).
# What did the add say, and is the item there afterwards?
. $(dirname $(readlink -f $0))/common.sh
D=$W/s1; setup $D 18125 a b; A=$D/a
pl $A list add L >/dev/null
agent $A 18125; AP=$AGENT_PID; sleep 1
kill -STOP $AP
start=$(date +%s); out=$(pl $A add L frozen-item 2>&1); rc=$?; echo "add (agent stopped) after $(( $(date +%s) - start )) s: rc=$rc: $out" | cut -c1-400
kill -CONT $AP; sleep 2
echo "after SIGCONT: $(items $A | tr '\n' ' ')"
pl $A log --limit 2 | cut -c1-150
stopagent $AP
