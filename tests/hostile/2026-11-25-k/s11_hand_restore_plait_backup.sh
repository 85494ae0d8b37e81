#!/bin/bash
# s11: a backup made by `plait backup`, put back BY HAND (rm -rf home; cp -a backup home) instead of `plait restore`,
# and used directly as a home (--home backupdir). Is it noticed (next edit on a new timeline)?
. /tmp/hostile11/scripts/common.sh
D=$W/s11; rm -rf $D; mkdir -p $D; mkhome $D/o o; pl $D/o list add L >/dev/null; pl $D/o add L x >/dev/null
OT=$(pl $D/o status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["timeline"])')
pl $D/o backup $D/bk >/dev/null; echo "backup's store_file row: '$(sqlite3 $D/bk/plait.db "select value from meta where key='store_file'")' orig: $(sqlite3 $D/o/plait.db "select value from meta where key='store_file'")"
pl $D/o add L y >/dev/null
cp -a $D/bk $D/bk2; cp $D/o/config.toml $D/bk2/
rm -rf $D/o.keep; mv $D/o $D/o.keep; cp -a $D/bk $D/o; cp $D/o.keep/config.toml $D/o/
out=$(pl $D/o add L z 2>&1); NT=$(pl $D/o status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["timeline"])')
echo "hand restore: note=$(echo "$out" | grep -c '^note') next edit on $([ $NT = $OT ] && echo ORIGINAL-TIMELINE || echo new) timeline"
out=$(pl $D/bk2 add L w 2>&1); NT=$(pl $D/bk2 status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["timeline"])')
echo "backup dir used as home: note=$(echo "$out" | grep -c '^note') next edit on $([ $NT = $OT ] && echo ORIGINAL-TIMELINE || echo new) timeline"
