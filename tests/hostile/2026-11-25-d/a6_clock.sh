#!/bin/bash
# A/fix 6 (t4_clock.py of 2026-11-25-c): H sends V's agent a timeline whose changes carry extreme wall times;
# what `plait log` (plain, --json) shows.
. $(dirname $(readlink -f $0))/common.sh; D=$W/a6
setup $D 17885 V H; agent $D/V 17885; VP=$AGENT_PID; sleep 1
cd $HD/../2026-11-25-c && timeout 60 python3 t4_clock.py $D/H 17885 Clocks > /dev/null 2>&1; sleep 1
echo "--- plain:"; $P log --home $D/V | grep -i "wall\|Clocks" | cut -c1-160
echo "--- json time fields:"; $P log --home $D/V --json | python3 -c "
import json,sys; d=json.load(sys.stdin); rows=d if isinstance(d,list) else d.get('changes', d.get('log', []))
for r in rows: print(r.get('time'), '|', str(r.get('description', r.get('text','')))[:50])"
kill $VP; wait $VP 2>/dev/null
