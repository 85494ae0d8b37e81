#!/bin/bash
# b1_baseline_rot.sh SEED [ROUNDS]: a and b hold 300 items, both compacted (everything in the baseline). Each round
# flips one random bit inside a's baseline blob (an overflow page of table baseline, found with dbstat), then:
# show, doctor (verdict), repair, sync with b's agent, doctor. Compares a's `show --json` and digest with b's; flags
# a doctor "ok" while a's lists differ from b's.
. $(dirname $(readlink -f $0))/common.sh
SEED=${1:-1}; R=${2:-8}; RANDOM=$SEED; echo "seed=$SEED"
D=$W/b1; setup $D 18126 a b; A=$D/a
pl $A list add L >/dev/null; ( for i in $(seq 1 300); do echo "add L item-$i"; done; for i in $(seq 1 30); do echo "done item-$i"; done ) | pl $A batch >/dev/null
agent $D/b 18127; BP=$AGENT_PID; sleep 0.5; pl $A sync --no-discovery >/dev/null; pl $D/b add L bee >/dev/null; pl $A sync --no-discovery >/dev/null
pl $A compact | tail -1 | cut -c1-120; stopagent $BP; pl $D/b compact | tail -1 | cut -c1-120; agent $D/b 18127; BP=$AGENT_PID; sleep 0.5
items $D/b > $D/b.items; pl $D/b show --json > $D/b.json; pl $D/b status | grep digest > $D/b.digest; rm -rf $D/good; cp -a $A $D/good
pages=$(sqlite3 -readonly $A/plait.db "select pageno from dbstat where name='baseline' and pagetype='overflow'" | tr '\n' ' '); echo "baseline overflow pages: $pages"
set -- $pages; np=$#
for r in $(seq 1 $R); do
  rm -rf $A; cp -a $D/good $A
  pg=$(echo $pages | cut -d' ' -f$((RANDOM % np + 1))); off=$(( (pg-1)*4096 + 4 + RANDOM % 4092 )); bit=$((RANDOM % 8))
  python3 -c "f=open('$A/plait.db','r+b');f.seek($off);b=f.read(1);f.seek($off);f.write(bytes([b[0]^(1<<$bit)]))"
  s1=$(pl $A show 2>&1 | grep -c '\[.\]'); e1=$(pl $A show 2>&1 | grep -m1 -iE 'error|warn' | cut -c1-150)
  pl $A doctor > $D/doc1 2>&1; rd=$?
  same=$([ "$(pl $A show --json 2>/dev/null)" = "$(cat $D/b.json)" ] && echo same || echo differs)
  pl $A repair > $D/rep 2>&1; rr=$?; pl $A sync --no-discovery > $D/sync 2>&1; rs=$?; pl $A doctor > $D/doc2 2>&1; rd2=$?
  healed=$([ "$(pl $A show --json 2>/dev/null)" = "$(cat $D/b.json)" ] && echo healed || echo NOT-healed)
  dg=$([ "$(pl $A status 2>/dev/null | grep digest)" = "$(cat $D/b.digest)" ] && echo digest-equal || echo DIGEST-DIFFERS)
  [ $healed != healed ] && diff <(pl $A show --json) $D/b.json | head -6 | sed 's/^/    diff: /' > $D/diff
  flag=; [ $rd = 0 -a $same = differs ] && flag=" DOCTOR-OK-BUT-DIFFERS"; [ $rd2 = 0 -a $healed != healed ] && flag="$flag DOCTOR2-OK-BUT-DIFFERS"
  echo "round $r: page $pg byte $off bit $bit: show=$s1 rows $e1 | doctor=$rd($same) repair=$rr sync=$rs doctor2=$rd2 $healed $dg$flag"; cat $D/diff 2>/dev/null; rm -f $D/diff
  [ $healed != healed -a $rd2 = 0 ] && { echo "    sync said: $(head -2 $D/sync | cut -c1-200 | tr '\n' ' ')"; echo "    a peers: $(pl $A peers | cut -c100-200)"; echo "    b peers: $(pl $D/b peers | cut -c100-200)"; echo "    a digest: $(pl $A status | grep digest | cut -c11-30)  b digest: $(cut -c11-30 $D/b.digest)"; }
  grep -m2 -E 'FAIL|WARN' $D/doc1 | cut -c1-220 | sed 's/^/    doc1: /'; [ $rd2 != 0 ] && grep -m2 -E 'FAIL|WARN' $D/doc2 | cut -c1-220 | sed 's/^/    doc2: /'
done
stopagent $BP
