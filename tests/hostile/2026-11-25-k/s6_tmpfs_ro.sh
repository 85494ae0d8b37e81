#!/bin/bash
# s6: (a) cp -a of a home on tmpfs, first add on the copy; (b) mv of a home tmpfs -> ext4 and back; (c) copy on a
# read-only bind mount: show/status/doctor/add/sync; (d) read-only plait.db (chmod 444) copy.
. /tmp/hostile11/scripts/common.sh
D=$W/s6; rm -rf $D; mkdir -p $D/tm $D/ro; mount -t tmpfs -o size=20M tmpfs $D/tm; trap 'umount $D/ro 2>/dev/null; umount $D/tm; stopall' EXIT
tl() { pl $1 status --json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["timeline"], d["summary"])'; }
mkhome $D/tm/o o; pl $D/tm/o list add L >/dev/null; pl $D/tm/o add L x >/dev/null
echo "(a) tmpfs: store_file=$(sqlite3 $D/tm/o/plait.db "select value from meta where key='store_file'") orig $(tl $D/tm/o)"
cp -a $D/tm/o $D/tm/c; pl $D/tm/c add L c1 2>&1 | grep -c '^note' | sed 's/^/  notes on first add of tmpfs copy: /'; echo "  copy: $(tl $D/tm/c)"
echo "(b) mv tmpfs->ext4"; mv $D/tm/c $D/c_ext; pl $D/c_ext add L c2 2>&1 | grep -c '^note' | sed 's/^/  notes: /'; echo "  $(tl $D/c_ext)"
mv $D/c_ext $D/tm/c_back; pl $D/tm/c_back add L c3 2>&1 | grep -c '^note' | sed 's/^/  back to tmpfs notes: /'; echo "  $(tl $D/tm/c_back)"
echo "(c) read-only bind mount of a fresh copy"; cp -a $D/tm/o $D/rosrc; mount --bind -o ro $D/rosrc $D/ro
for c in show status doctor log lists; do out=$(pl $D/ro $c 2>&1); echo "  $c rc=$? $(echo "$out" | grep -iE 'note|error|fail|read-only|readonly' | head -2 | cut -c1-200)"; done
out=$(pl $D/ro add L roadd 2>&1); echo "  add rc=$? $(echo "$out" | head -3 | cut -c1-250)"
umount $D/ro
echo "(d) chmod 444 plait.db of a fresh copy"; cp -a $D/tm/o $D/c444; chmod 444 $D/c444/plait.db
for c in show status log; do out=$(pl $D/c444 $c 2>&1); echo "  $c rc=$? $(echo "$out" | grep -iE 'note|error|fail|read' | head -2 | cut -c1-200)"; done
out=$(pl $D/c444 add L a444 2>&1); echo "  add rc=$? $(echo "$out" | head -3 | cut -c1-250)"
