#!/bin/bash
# t3_headseq_rot.sh DELTA: a's own timelines.head_seq (bookkeeping; the change rows are intact) is off by DELTA
# (rot simulated with one UPDATE through sqlite3). Then doctor, an edit on a, two syncs: converged? anything lost?
. $(dirname $(readlink -f $0))/common.sh
DELTA=${1:--1}; D=$W/t3; setup $D 18141 a b; A=$D/a
pl $A list add L >/dev/null; pl $A add L x1 >/dev/null; pl $A add L x2 >/dev/null
agent $D/b 18142; BP=$AGENT_PID; sleep 0.5; pl $A sync --no-discovery >/dev/null; stopagent $BP
TL=$(sqlite3 -readonly $A/plait.db "select tl from timelines order by head_seq desc limit 1")
sqlite3 $A/plait.db "update timelines set head_seq = head_seq + ($DELTA) where tl = $TL"
echo "own head_seq moved by $DELTA; integrity: $(sqlite3 -readonly $A/plait.db 'pragma integrity_check' | head -1)"
echo "--- status"; pl $A status 2>&1 | grep -E 'summary|rror|warn' | cut -c1-200
echo "--- doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor|peer device|→ start' | cut -c1-300
echo "--- add x3"; pl $A add L x3 2>&1 | cut -c1-250
agent $D/b 18142; BP=$AGENT_PID; sleep 0.5
for i in 1 2; do echo "--- sync"; pl $A sync --no-discovery 2>&1 | cut -c1-300; done
echo "a: $(items $A | tr '\n' ' ')"; echo "b: $(items $D/b | tr '\n' ' ')"
echo "--- doctor a"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor' | cut -c1-300
stopagent $BP
