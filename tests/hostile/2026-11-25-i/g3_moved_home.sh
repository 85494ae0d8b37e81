#!/bin/bash
# g3_moved_home.sh: the home directory is moved away under a running agent and a restored copy put at its path
# (`mv a a.old; cp -a backup a`). Does the agent notice (its store's path now names another file)? Can a second agent
# start on the new home while the first runs (two agents, one identity)? Where do edits go?
. $(dirname $(readlink -f $0))/common.sh
D=$W/g3; setup $D 18240 a b; A=$D/a; B=$D/b
pl $A list add L >/dev/null; for x in x1 x2; do pl $A add L $x >/dev/null; done
agent $B 18241; BP=$AGENT_PID; agent $A 18240 --peer 127.0.0.1:18241; AP=$AGENT_PID; sleep 1
rm -rf $D/snap; cp -a $A $D/snap; rm -f $D/snap/api.sock $D/snap/plait.lock 2>/dev/null
pl $A add L y1 >/dev/null; sleep 0.5
mv $A $D/a.old; cp -a $D/snap $A
echo "moved; agent alive? $(kill -0 $AP 2>/dev/null && echo yes || echo NO)"
pl $B add L b2 >/dev/null; sleep 2
echo "after b2 pushed: agent alive? $(kill -0 $AP 2>/dev/null && echo yes || echo NO)"
echo "--- CLI add y2 on the path a"; pl $A add L y2 2>&1 | cut -c1-200; sleep 1
echo "agent alive? $(kill -0 $AP 2>/dev/null && echo yes || echo NO)"
echo "--- second agent on a"; agent $A 18242 --peer 127.0.0.1:18241; AP2=$AGENT_PID; sleep 2
echo "second agent alive? $(kill -0 $AP2 2>/dev/null && echo yes || echo NO); first alive? $(kill -0 $AP 2>/dev/null && echo yes || echo NO)"
sleep 2
stopagent $AP; stopagent $AP2; stopagent $BP
echo "== a.old (the first agent's store): $(sqlite3 $D/a.old/plait.db 'select count(*) from changes') changes"
for h in a b; do echo "== $h: $(items $D/$h | tr '\n' ' ')"; done
echo "--- a log"; grep -vE 'session with|connected to|local API' $A.log | cut -c1-250
