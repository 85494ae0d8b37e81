#!/bin/bash
# t4_meta_rot.sh KEY SQLEXPR: a's meta row KEY (bookkeeping) is set to SQLEXPR (rot simulated with one UPDATE), e.g.
#   own_timeline 'value+1'   |   own_timeline '(select tl from timelines where tl<>value limit 1)' (b's timeline)
# Then status, doctor, an edit, two syncs with b: converged? anything lost? true messages?
. $(dirname $(readlink -f $0))/common.sh
K=${1:-own_timeline}; X=${2:-value+1}; D=$W/t4; setup $D 18143 a b; A=$D/a
pl $A list add L >/dev/null; pl $A add L x1 >/dev/null
agent $D/b 18144; BP=$AGENT_PID; sleep 0.5; pl $A sync --no-discovery >/dev/null; pl $D/b add L b1 >/dev/null; pl $A sync --no-discovery >/dev/null; stopagent $BP
sqlite3 $A/plait.db "update meta set value = $X where key = '$K'"; echo "meta $K := $X -> $(sqlite3 -readonly $A/plait.db "select value from meta where key='$K'")"
echo "--- status"; pl $A status 2>&1 | grep -E 'timeline|summary|rror|warn' | cut -c1-200
echo "--- doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor|peer device|→ start' | cut -c1-300
echo "--- add x2"; pl $A add L x2 2>&1 | cut -c1-250
agent $D/b 18144; BP=$AGENT_PID; sleep 0.5
for i in 1 2; do echo "--- sync"; pl $A sync --no-discovery 2>&1 | cut -c1-300; done
echo "a: $(items $A | tr '\n' ' ')"; echo "b: $(items $D/b | tr '\n' ' ')"
echo "--- doctor a"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor' | cut -c1-300
echo "--- peers b"; pl $D/b peers | cut -c90-300
stopagent $BP
