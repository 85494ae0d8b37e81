#!/bin/bash
# s2: cp -a of a home, then N concurrent adds on the copy as its first writes. Expect exactly one new timeline, one note (or one per racing process), all adds kept.
. /tmp/hostile11/scripts/common.sh
N=${1:-8}; R=${2:-5}; D=$W/s2; rm -rf $D; mkdir -p $D; mkhome $D/o o; pl $D/o list add L >/dev/null; pl $D/o add L x >/dev/null
for r in $(seq 1 $R); do
  rm -rf $D/c; cp -a $D/o $D/c
  for i in $(seq 1 $N); do pl $D/c add L c$i >$D/out.$i 2>&1 & done; wait
  notes=$(cat $D/out.* | grep -c '^note: this store'); fails=$(grep -L '^added' $D/out.* | wc -l)
  echo "run $r: summary $(pl $D/c status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"])') notes=$notes failed_adds=$fails items=$(pl $D/c show | grep -c '\[ \]')"
  grep -hv -e '^added' -e '^note: this store' $D/out.* | sort | uniq -c | head -3
done
