#!/bin/bash
# r10_rejoin_recompletes.sh: x1 is completed on both devices. d, offline, reopens x1 and renames x2. a (not restored,
# nothing wrong with it) runs `plait rejoin`, which re-sends its state. Then they sync. Is d's reopen kept?
. $(dirname $(readlink -f $0))/common.sh
D=$W/r10; setup $D 18372 a d; A=$D/a; DD=$D/d
pl $A list add L >/dev/null; for x in x1 x2 x3; do pl $A add L $x >/dev/null; done; pl $A done x1 >/dev/null
for i in 1 2 3 4 5; do pl $A add L p$i >/dev/null; done    # a has more changes than d (higher Lamport times)
agent $A 18372; AP=$AGENT_PID; sleep 0.5; pl $DD sync --no-discovery >/dev/null
echo "--- d (offline) reopens x1, renames x2"; pl $DD reopen x1; pl $DD edit x2 x2-by-d
echo "--- a: plait rejoin"; pl $A rejoin
echo "--- d syncs"; pl $DD sync --no-discovery | cut -c1-200
stopagent $AP
for h in a d; do echo "== $h: $(itemsj $D/$h | tr '\n' ' ')"; done
