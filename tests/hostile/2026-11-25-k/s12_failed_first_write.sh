#!/bin/bash
# s12: first write on a cp -a copy is a command that fails (unknown list / unknown item / bad batch line), then a good add.
# Count notes over both commands and whether the good add is on a new timeline.
. /tmp/hostile11/scripts/common.sh
D=$W/s12; rm -rf $D; mkdir -p $D; mkhome $D/o o; pl $D/o list add L >/dev/null; pl $D/o add L x >/dev/null
OT=$(pl $D/o status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["timeline"])')
for f in 'add NOLIST foo' 'edit ffff1234 nope' 'done nosuchitem' 'list rm NOLIST' 'rm x --bogus'; do
  rm -rf $D/c; cp -a $D/o $D/c
  o1=$(pl $D/c $f 2>&1); r1=$?; o2=$(pl $D/c add L good 2>&1)
  s=$(pl $D/c status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["timeline"], d["summary"])')
  echo "[$f] rc=$r1 notes=$(echo "$o1" | grep -c '^note')+$(echo "$o2" | grep -c '^note') add on $([ "${s%% *}" = "$OT" ] && echo ORIGINAL || echo new) timeline; summary ${s#* } | $(echo "$o1" | grep -v '^note' | head -1 | cut -c1-100)"
done
printf 'add L b1\nadd NOLIST b2\n' > $D/batch.txt; rm -rf $D/c; cp -a $D/o $D/c; o1=$(pl $D/c batch < $D/batch.txt 2>&1); r1=$?; o2=$(pl $D/c add L good 2>&1)
s=$(pl $D/c status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["timeline"], d["summary"])'); echo "[failing batch] rc=$r1 notes=$(echo "$o1" | grep -c '^note')+$(echo "$o2" | grep -c '^note') add on $([ "${s%% *}" = "$OT" ] && echo ORIGINAL || echo new); summary ${s#* }"
