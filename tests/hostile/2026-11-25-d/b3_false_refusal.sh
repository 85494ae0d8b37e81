#!/bin/bash
# B: can X's agent make Y say X "refused this device (not paired there)" while Y is paired there? X's agent closes
# connections from a device beyond 8 open ones "unanswered" (after the TLS handshake, before its Hello): N parallel
# `plait sync` from Y (a script, cron jobs piling up on a slow peer) then read that as a refusal.
# usage: b3_false_refusal.sh [N] [BIG] [late]   BIG: changes on X (makes each sync last longer); late: the N-th sync
# starts 1.5 s after the others (when they are past their Hello), so its false refusal is the last word in `peers`
. $(dirname $(readlink -f $0))/common.sh; D=$W/b3; N=${1:-12}; BIG=${2:-20000}
setup $D 17850 X Y
( echo "list add Big"; for i in $(seq 1 $BIG); do echo "add Big \"item $i\""; done ) | $P batch --home $D/X >/dev/null
agent $D/X 17850; XP=$AGENT_PID; sleep 1
for i in $(seq 1 $N); do [ "$3" = late ] && [ $i = $N ] && sleep 1.5; $P sync --home $D/Y --config $D/Y/config.toml --peer 127.0.0.1:17850 --timeout 30 > $D/s$i.out 2>&1 & done
wait $(jobs -p | grep -v "^$XP$") 2>/dev/null
for i in $(seq 1 $N); do wait %$((i+1)) 2>/dev/null; done
echo "--- sync outputs (count by line):"; cat $D/s*.out | cut -c1-200 | sort | uniq -c
echo "--- Y peers:"; $P peers --home $D/Y | cut -c1-200
echo "--- Y peers --json refused_this_device:"; $P peers --home $D/Y --json | python3 -c "import json,sys; [print(p.get('refused_this_device')) for p in json.load(sys.stdin)['peers']]"
echo "--- X log (closed/refused):"; grep -i "closed a connection\|refused" $D/X.log | cut -c1-220
kill $XP; wait $XP 2>/dev/null
