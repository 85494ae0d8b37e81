#!/bin/bash
# m2_flip_heal.sh SEED [ROUNDS] [FLIPS]: a and b hold the same 400 items (synced). Each round: copy a's good home,
# flip FLIPS random bytes of a's plait.db (at rest), then: show, doctor (its verdict), repair, sync with b's agent,
# doctor again. Flags: doctor "ok" while a's items differ from b's; a crash (rc>=128); a not healed after repair+sync.
. $(dirname $(readlink -f $0))/common.sh
SEED=${1:-1}; R=${2:-20}; F=${3:-3}; RANDOM=$SEED; echo "seed=$SEED rounds=$R flips=$F"
D=$W/m2; setup $D 18195 a b; A=$D/a
pl $A list add L >/dev/null; ( for i in $(seq 1 400); do echo "add L item-$i"; done; for i in $(seq 1 50); do echo "done item-$i"; done ) | pl $A batch >/dev/null
agent $D/b 18196; BP=$AGENT_PID; sleep 0.5; pl $A sync --no-discovery >/dev/null
items $D/b > $D/b.items; pl $D/b status | grep digest > $D/b.digest
rm -rf $D/good; cp -a $A $D/good
for r in $(seq 1 $R); do
  rm -rf $A; cp -a $D/good $A
  sz=$(stat -c %s $A/plait.db); offs=""
  for f in $(seq 1 $F); do off=$(( (RANDOM*32768+RANDOM) % sz )); offs="$offs $off"; python3 -c "f=open('$A/plait.db','r+b');f.seek($off);b=f.read(1);f.seek($off);f.write(bytes([b[0]^(1<<($RANDOM%8))]))"; done
  rm -rf $D/bad0; cp -a $A $D/bad0
  pl $A show --json > $D/show.out 2>$D/show.err; rs=$?
  pl $A doctor > $D/doc1 2>&1; rd=$?
  same=$( [ "$(items $A 2>/dev/null)" = "$(cat $D/b.items)" ] && echo same || echo differs)
  flag=""; [ $rs -ge 128 -o $rd -ge 128 ] && flag="$flag CRASH"
  [ $rd = 0 -a $same = differs ] && flag="$flag DOCTOR-OK-BUT-DIFFERS"
  grep -q 'restore from a backup' $D/doc1 && ! sqlite3 -readonly $A/plait.db 'pragma integrity_check' 2>&1 | grep -qv '^ok$' && flag="$flag BACKUP-ADVICE-ON-SOUND-FILE"
  pl $A repair > $D/rep 2>&1; rr=$?
  pl $A sync --no-discovery > $D/sync 2>&1; rsy=$?
  pl $A doctor > $D/doc2 2>&1; rd2=$?
  healed=$( [ "$(items $A 2>/dev/null)" = "$(cat $D/b.items)" ] && [ "$(pl $A status 2>/dev/null | grep digest)" = "$(cat $D/b.digest)" ] && echo healed || echo NOT-healed)
  [ $rr -ge 128 -o $rsy -ge 128 ] && flag="$flag CRASH"
  [ $rd2 = 0 -a $healed != healed ] && flag="$flag DOCTOR2-OK-BUT-DIFFERS"
  echo "round $r offs:$offs show=$rs doctor=$rd($same) repair=$rr sync=$rsy doctor2=$rd2 $healed$flag $(grep -m1 -E 'FAIL' $D/doc2 | cut -c1-140)"
  [ -n "$flag" -o $rd2 != 0 ] && rm -rf $D/bad.$r && cp -a $D/bad0 $D/bad.$r
done
stopagent $BP
