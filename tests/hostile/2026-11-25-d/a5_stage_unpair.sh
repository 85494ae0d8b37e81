#!/bin/bash
# A/fix 5 (t3_stage_unpair.py of 2026-11-25-c): paired H stages MB MiB of a baseline it never finishes on V's agent;
# V's user unpairs H. Is the staging dropped? usage: a5_stage_unpair.sh [MB]
. $(dirname $(readlink -f $0))/common.sh; D=$W/a5; MB=${1:-20}
setup $D 17880 V H; $P list add L --home $D/V >/dev/null
agent $D/V 17880; VP=$AGENT_PID; sleep 1
q() { sqlite3 "file:$D/V/plait.db?mode=ro" "select (select count(*) from staged_baselines), count(*), coalesce(sum(length(data)),0) from staged_baseline_chunks" 2>&1; }
cd $HD/../2026-11-25-c && timeout 60 python3 t3_stage_unpair.py $D/V $D/H 17880 $MB
echo "staged baselines, chunk rows, bytes right after unpair: $(q)"; sleep 1
kill $VP; wait $VP 2>/dev/null
echo "after agent stop: $(q)"; $P compact --home $D/V >/dev/null 2>&1; echo "after compact: $(q)"
ls -la $D/V/ | grep plait.db
