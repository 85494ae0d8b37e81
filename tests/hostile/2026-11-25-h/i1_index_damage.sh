#!/bin/bash
# i1_index_damage.sh [SEQ]: one flipped bit in the changes_by_timeline index (derived data; the change rows are
# untouched) of a, whose 400 items b also holds (b's agent running). What show, doctor, repair, sync and add
# say and do; then, on a copy of the damaged file, what a plain SQLite REINDEX does.
. $(dirname $(readlink -f $0))/common.sh
SEQ=${1:-200}; D=$W/i1; setup $D 18197 a b; A=$D/a
pl $A list add L >/dev/null; ( for i in $(seq 1 400); do echo "add L item-$i"; done ) | pl $A batch >/dev/null
agent $D/b 18198; BP=$AGENT_PID; sleep 0.5; pl $A sync --no-discovery | cut -c1-150
python3 $HD/index_flip.py $A/plait.db $SEQ
rm -rf $D/copy; cp -a $A $D/copy
echo "--- show: $(pl $A show 2>&1 | grep -c '\[ \]') items shown"
echo "--- doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor' | cut -c1-300
echo "--- repair"; pl $A repair 2>&1 | cut -c1-300; echo "rc=${PIPESTATUS[0]}"
echo "--- show: $(pl $A show 2>&1 | grep -c '\[ \]') items shown"
echo "--- sync"; pl $A sync --no-discovery 2>&1 | cut -c1-300
echo "--- repair again"; pl $A repair 2>&1 | tail -1 | cut -c1-300
echo "--- add"; pl $A add L new 2>&1 | cut -c1-300
echo "--- show: $(pl $A show 2>&1 | grep -c '\[ \]') items shown; b shows $(pl $D/b show 2>&1 | grep -c '\[ \]')"
echo "--- the damaged copy after sqlite3 REINDEX:"; sqlite3 $D/copy/plait.db 'reindex; pragma integrity_check'; pl $D/copy doctor 2>&1 | grep -E 'FAIL|WARN' | cut -c1-200; echo "  $(pl $D/copy show | grep -c '\[ \]') items shown"
stopagent $BP
