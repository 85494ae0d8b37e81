#!/bin/bash
# k1_made_again.sh VARIANT [MODE]: a backed up; a goes on (y1-y3, done x1) and syncs; b compacts a's changes into its
# baseline; the backup is restored over a; VARIANT's edits are made on the restored a; then MODE brings them back:
#   MODE=sync (default): plait sync twice;  MODE=agent: a's agent runs against b's agent;  MODE=repair / rejoin:
#   one sync, then that command, then sync.
# Prints what each command says, both homes' items (list|text|done), digests, doctor on a.
. $(dirname $(readlink -f $0))/common.sh
V=${1:-plain}; MODE=${2:-sync}; D=$W/k1; setup $D 18200 a b; A=$D/a; B=$D/b
pl $A list add L >/dev/null; pl $A list add M >/dev/null; for x in x1 x2 x3; do pl $A add L $x >/dev/null; done
[ $V = peerdel ] && pl $A list add Q >/dev/null && pl $A add Q q1 >/dev/null
agent $B 18201; BP=$AGENT_PID; sleep 0.5
pl $A sync --no-discovery >/dev/null
rm -rf $D/snap; cp -a $A $D/snap          # the backup
for x in y1 y2 y3; do pl $A add L $x >/dev/null; done; pl $A done x1 >/dev/null
pl $A sync --no-discovery >/dev/null
pl $B add L b0 >/dev/null
[ $V = peerdel ] && pl $B list rm Q >/dev/null
[ $V = peerdelitem ] && pl $B rm x2 >/dev/null
pl $A sync --no-discovery >/dev/null; stopagent $BP
echo "--- b compacts"; pl $B compact | head -3
pl $B add L b1 >/dev/null
rm -rf $A; cp -a $D/snap $A              # restore the backup
echo "--- edits on restored a ($V)"
case $V in
 plain) pl $A add L z1 ;;
 del) pl $A add L z1; pl $A add L z2; pl $A rm z2 ;;
 move) pl $A add L z1; pl $A move z1 --to M ;;
 listnew) pl $A list add N; pl $A add N z3; pl $A add N z4; pl $A list rename N N2; pl $A done z4 ;;
 listnewrm) pl $A list add N; pl $A add N z3; pl $A list rm N ;;
 listheldrm) pl $A add L z1; pl $A list rm L ;;
 movetonew) pl $A list add N; pl $A move x2 --to N; pl $A add N z5 ;;
 rename) pl $A add L z1; pl $A edit z1 z1b; pl $A done z1b; pl $A reopen z1b; pl $A edit z1b z1c ;;
 heldedits) pl $A add L z1; pl $A edit x2 x2-renamed; pl $A done x3; pl $A rm x2-renamed ;;
 after) pl $A add L z1 --after x2; pl $A add L z0 --top; pl $A move x3 --after z1 ;;
 peerdel) pl $A add Q z1 ;;
 peerdelitem) pl $A add L z1 --after x2; pl $A move x2 --to M;;
 many) for i in $(seq 1 300); do echo "add L m$i"; done | pl $A batch | tail -1 ;;
esac 2>&1 | cut -c1-200
if [ $MODE = agent ]; then
  agent $B 18201; BP=$AGENT_PID; agent $A 18200 --peer 127.0.0.1:18201; AP=$AGENT_PID; sleep 5
  stopagent $AP; echo "--- a agent log"; grep -vE 'listening|local API|agent stopped|connected|started' $A.log | cut -c1-400
else
  agent $B 18201; BP=$AGENT_PID; sleep 0.5
  echo "--- sync 1"; pl $A sync --no-discovery 2>&1 | cut -c1-500; echo "rc=${PIPESTATUS[0]}"
  if [ $MODE != sync ]; then echo "--- $MODE"; pl $A $MODE 2>&1 | cut -c1-400; echo "rc=${PIPESTATUS[0]}"; fi
  echo "--- sync 2"; pl $A sync --no-discovery 2>&1 | cut -c1-500; echo "rc=${PIPESTATUS[0]}"
  echo "--- sync 3"; pl $A sync --no-discovery 2>&1 | cut -c1-300; echo "rc=${PIPESTATUS[0]}"
fi
stopagent $BP
for h in a b; do echo "== $h:"; itemsj $D/$h | tr '\n' ' '; echo; pl $D/$h status | grep -E 'digest'; done
echo "--- doctor a"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor|peer device|→ start|avahi' | cut -c1-600
echo "--- b log"; grep -vE 'listening|local API|agent stopped' $B.log | cut -c1-300 | tail -5
