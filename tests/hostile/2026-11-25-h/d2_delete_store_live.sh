#!/bin/bash
# d2_delete_store_live.sh MODE: a's agent runs (b offline); plait.db (MODE=db) or the whole store trio
# (MODE=all: plait.db, -wal, -shm) is deleted under it. What do add (through the agent), show, status and
# doctor say; what is left after the agent stops; does b get the edits when it comes back?
. $(dirname $(readlink -f $0))/common.sh
MODE=${1:-db}; D=$W/d2; setup $D 18107 a b; A=$D/a
pl $A list add L >/dev/null; pl $A add L before >/dev/null
agent $A 18107; AP=$AGENT_PID; sleep 1
case $MODE in db) rm $A/plait.db;; all) rm $A/plait.db $A/plait.db-wal $A/plait.db-shm;; esac
ls $A | tr '\n' ' '; echo
echo "--- add after1"; pl $A add L after1 2>&1 | cut -c1-250
echo "--- show"; pl $A show 2>&1 | cut -c1-200
echo "--- status"; pl $A status 2>&1 | grep -E 'data|rror' | cut -c1-250
echo "--- doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor|peer device|→ start' | cut -c1-300
echo "--- b comes online"; agent $D/b 18108; BP=$AGENT_PID; sleep 3; echo "b: $(items $D/b | tr '\n' ' ')"
echo "--- add after2"; pl $A add L after2 2>&1 | cut -c1-250; sleep 1; echo "b: $(items $D/b | tr '\n' ' ')"
stopagent $AP; echo "--- a's agent stopped; a now:"; ls $A | tr '\n' ' '; echo
pl $A show 2>&1 | cut -c1-250; pl $A doctor 2>&1 | grep -E 'FAIL|WARN' | cut -c1-250
stopagent $BP; grep -hE ' (error|warning) ' $A.log | cut -d' ' -f2- | cut -c1-200 | sort | uniq -c
