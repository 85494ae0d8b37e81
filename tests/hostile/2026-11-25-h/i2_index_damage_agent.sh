#!/bin/bash
# i2_index_damage_agent.sh [SEQ]: as i1, but nobody runs repair: a's agent is simply started on the home with one
# flipped bit in the changes_by_timeline index (b's agent running). What show says before and after.
. $(dirname $(readlink -f $0))/common.sh
SEQ=${1:-300}; D=$W/i2; setup $D 18123 a b; A=$D/a
pl $A list add L >/dev/null; ( for i in $(seq 1 400); do echo "add L item-$i"; done ) | pl $A batch >/dev/null
agent $D/b 18124; BP=$AGENT_PID; sleep 0.5; pl $A sync --no-discovery | cut -c1-150
python3 $HD/index_flip.py $A/plait.db $SEQ
echo "before the agent: show lists $(pl $A show | grep -c '\[ \]') items"
agent $A 18123; AP=$AGENT_PID; sleep 3
echo "with the agent:   show lists $(pl $A show | grep -c '\[ \]') items"
pl $A add L new 2>&1 | cut -c1-250
stopagent $AP; stopagent $BP
echo "after the agent:  show lists $(pl $A show | grep -c '\[ \]') items; b shows $(pl $D/b show | grep -c '\[ \]')"
grep -E 'error|warn' $A.log | cut -d' ' -f2- | cut -c1-330
