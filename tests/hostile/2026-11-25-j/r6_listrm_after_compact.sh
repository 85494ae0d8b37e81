#!/bin/bash
# r6_listrm_after_compact.sh: observed-remove of `list rm` after the placing changes were compacted. a makes list L
# (i1, i2) and list M (m1); everyone syncs; c goes offline and adds i3 to L and moves m1 into L; b compacts, then
# deletes L. Then everyone syncs. Expected (DESIGN §2): i1, i2 gone; i3 and m1 survive, L with them; same everywhere.
. $(dirname $(readlink -f $0))/common.sh
D=$W/r6; setup $D 18394 a b c; A=$D/a; B=$D/b; C=$D/c
pl $A list add L >/dev/null; pl $A list add M >/dev/null; pl $A add L i1 >/dev/null; pl $A add L i2 >/dev/null; pl $A add M m1 >/dev/null
agent $A 18394; AP=$AGENT_PID; agent $B 18395; BP=$AGENT_PID; sleep 0.5
pl $C sync --no-discovery >/dev/null; pl $C add M c0 >/dev/null; pl $C sync --no-discovery >/dev/null; sleep 0.5
pl $C add L i3 >/dev/null; pl $C move m1 --to L >/dev/null          # c offline: no agent
pl $A add M a1 >/dev/null; pl $B add M b1 >/dev/null; sleep 0.5
echo "--- b compacts"; pl $B compact
echo "--- b: list rm L"; pl $B list rm L
pl $C sync --no-discovery | cut -c1-200; sleep 1; pl $C sync --no-discovery >/dev/null
stopagent $AP; stopagent $BP
for h in a b c; do echo "== $h: $(itemsj $D/$h | tr '\n' ' ')"; pl $D/$h status | grep digest; done
