#!/bin/bash
# b3_checkpoint_rot.sh SEED [ROUNDS]: a holds 300 items (no compaction) and a checkpoint; b, offline, edited the same
# list concurrently (its changes sort before a's later ones: a late change for a). Each round: flip one bit in a's
# checkpoint blob, then a syncs with b (the late changes roll a back to the checkpoint and replay), then doctor.
# Compares a's show --json and digest with b's after both synced; flags doctor ok with a differing state.
. $(dirname $(readlink -f $0))/common.sh
SEED=${1:-1}; R=${2:-8}; RANDOM=$SEED; echo "seed=$SEED"
D=$W/b3; setup $D 18130 a b; A=$D/a
pl $A list add L >/dev/null; agent $D/b 18131; BP=$AGENT_PID; sleep 0.5; pl $A sync --no-discovery >/dev/null; stopagent $BP
( for i in $(seq 1 20); do echo "add L bee-$i"; done ) | pl $D/b batch >/dev/null
( for i in $(seq 1 300); do echo "add L item-$i"; done; for i in $(seq 1 30); do echo "done item-$i"; done ) | pl $A batch >/dev/null
pl $A repair >/dev/null   # writes a checkpoint
rm -rf $D/gooda $D/goodb; cp -a $A $D/gooda; cp -a $D/b $D/goodb
pages=$(sqlite3 -readonly $A/plait.db "select pageno from dbstat where name='checkpoints' and pagetype='overflow'" | tr '\n' ' '); echo "checkpoint pages: $pages"
np=$(echo $pages | wc -w)
for r in $(seq 1 $R); do
  rm -rf $A $D/b; cp -a $D/gooda $A; cp -a $D/goodb $D/b
  pg=$(echo $pages | cut -d' ' -f$((RANDOM % np + 1))); off=$(( (pg-1)*4096 + 4 + RANDOM % 4092 )); bit=$((RANDOM % 8))
  python3 -c "f=open('$A/plait.db','r+b');f.seek($off);b=f.read(1);f.seek($off);f.write(bytes([b[0]^(1<<$bit)]))"
  agent $D/b 18131; BP=$AGENT_PID; sleep 0.5
  pl $A sync --no-discovery > $D/sync 2>&1; rs=$?; sleep 0.5; pl $A sync --no-discovery >/dev/null 2>&1
  pl $A doctor > $D/doc 2>&1; rd=$?; stopagent $BP
  same=$([ "$(pl $A show --json 2>/dev/null)" = "$(pl $D/b show --json)" ] && echo same || echo DIFFERS)
  dg=$([ "$(pl $A status | grep digest)" = "$(pl $D/b status | grep digest)" ] && echo digest-equal || echo DIGEST-DIFFERS)
  flag=; [ $rd = 0 -a $same != same ] && flag=" DOCTOR-OK-BUT-DIFFERS"
  echo "round $r: page $pg byte $off bit $bit: sync=$rs doctor=$rd $same $dg$flag $(grep -m1 FAIL $D/doc | grep -v 'peer device' | cut -c1-160)"
done
