#!/bin/bash
# p2_ro_agent_spin.sh SECONDS: a's plait.db is read-only to the user running a's agent (nobody); b's agent runs.
# Counts the sessions a's agent starts (and b's log lines) in SECONDS, and a's CPU time.
. $(dirname $(readlink -f $0))/common.sh
S=${1:-5}; D=$W/p2; setup $D 18155 a b; A=$D/a
pl $A list add L >/dev/null; pl $A add L x1 >/dev/null; pl $D/b add L b1 2>/dev/null; pl $D/b list add M >/dev/null
agent $D/b 18156; BP=$AGENT_PID; sleep 0.5
chown -R nobody:nogroup $A; chmod a-w $A/plait.db
setpriv --reuid=nobody --regid=nogroup --clear-groups $P agent --home $A --config $A/config.toml --no-discovery --listen 127.0.0.1:18155 > $D/a-agent.log 2>&1 & AP=$!
sleep $S
echo "a's agent after ${S}s: cpu=$(awk '{print ($14+$15)/100}' /proc/$AP/stat 2>/dev/null)s"
echo "--- peers on b"; pl $D/b peers 2>&1; echo "--- b show"; pl $D/b show 2>&1; echo "--- a show"; setpriv --reuid=nobody --regid=nogroup --clear-groups $P show --home $A --config $A/config.toml 2>&1
kill -TERM $AP; wait $AP; echo "a agent exit rc=$?"
echo "a log: $(wc -l < $D/a-agent.log) lines, $(grep -c 'connected to' $D/a-agent.log) sessions"; grep 'ended' $D/a-agent.log | head -1 | cut -c1-330
echo "b log: $(wc -l < $D/b.log) lines"; grep -v 'listening\|local API' $D/b.log | sort -k2 | cut -d' ' -f2- | cut -c1-250 | uniq -c | sort -rn | head -4
chmod -R u+w $A; chown -R root:root $A; stopagent $BP
