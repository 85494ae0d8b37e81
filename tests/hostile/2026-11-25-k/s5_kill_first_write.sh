#!/bin/bash
# s5 [TRIES]: cp -a a home; run read-only commands on the copy (expect no note, store_file unchanged); then SIGKILL the
# copy's first `add` after a random 5-60 ms; then a second add. Expect: the copy's next edit is on a NEW timeline
# (not the original's), whatever the kill hit.
. /tmp/hostile11/scripts/common.sh
T=${1:-20}; D=$W/s5; rm -rf $D; mkdir -p $D; mkhome $D/o o; pl $D/o list add L >/dev/null; pl $D/o add L x >/dev/null
OT=$(pl $D/o status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["timeline"])')
rm -rf $D/c; cp -a $D/o $D/c; SF0=$(sqlite3 $D/c/plait.db "select value from meta where key='store_file'")
for c in show status doctor peers log lists id; do out=$(pl $D/c $c 2>&1); echo "$out" | grep -q '^note: this store' && echo "NOTE on read-only $c"; done
[ "$(sqlite3 $D/c/plait.db "select value from meta where key='store_file'")" = "$SF0" ] && echo "read-only cmds: store_file unchanged" || echo "read-only cmds CHANGED store_file"
bad=0
for t in $(seq 1 $T); do
  rm -rf $D/c; cp -a $D/o $D/c
  ms=$((5 + RANDOM % 56)); $P add L k$t --home $D/c --config $D/c/config.toml >$D/k.out 2>&1 & pid=$!; sleep 0.0$(printf %02d $ms); kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
  pl $D/c add L after$t >$D/a.out 2>&1
  NT=$(pl $D/c status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["timeline"])')
  sf=$(sqlite3 $D/c/plait.db "select value from meta where key='store_file'")
  res=$([ "$NT" = "$OT" ] && echo SAME_TIMELINE || echo new)
  [ $res = SAME_TIMELINE ] && bad=$((bad+1))
  echo "try $t kill@${ms}ms: next-edit timeline $res; notes(k,a)=$(grep -c '^note' $D/k.out),$(grep -c '^note' $D/a.out) summary=$(pl $D/c status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"])')"
done
echo "same-timeline (false negative) after kill: $bad of $T"
