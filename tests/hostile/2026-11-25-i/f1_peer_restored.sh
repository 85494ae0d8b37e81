#!/bin/bash
# f1_peer_restored.sh: the PEER (b) is restored from a backup that lacks a's latest changes (no fork anywhere).
# a then syncs with b: does a's sync say a timeline "had forked"? (the new "resolved there" rule in SessionMachine
# uses the peers table's last recorded summary of b, which is stale after b's restore)
. $(dirname $(readlink -f $0))/common.sh
D=$W/f1; setup $D 18210 a b; A=$D/a; B=$D/b
pl $A list add L >/dev/null; pl $A add L x1 >/dev/null
agent $B 18211; BP=$AGENT_PID; sleep 0.5
pl $A sync --no-discovery | sed 's/^/sync1: /'
stopagent $BP; rm -rf $D/snapb; cp -a $B $D/snapb; agent $B 18211; BP=$AGENT_PID; sleep 0.5
for x in y1 y2 y3; do pl $A add L $x >/dev/null; done
pl $A sync --no-discovery | sed 's/^/sync2: /'
stopagent $BP; rm -rf $B; cp -a $D/snapb $B; agent $B 18211; BP=$AGENT_PID; sleep 0.5
[ "$1" = edit ] && pl $A add L y4 >/dev/null
echo "--- a syncs with restored b"; pl $A sync --no-discovery 2>&1 | cut -c1-400; echo "rc=${PIPESTATUS[0]}"
echo "--- again"; pl $A sync --no-discovery 2>&1 | cut -c1-400; echo "rc=${PIPESTATUS[0]}"
stopagent $BP
for h in a b; do echo "== $h: $(items $D/$h | tr '\n' ' ')"; pl $D/$h status | grep digest; done
echo "--- b log"; grep -vE 'listening|local API|agent stopped|session with|connected to' $B.log | cut -c1-300
