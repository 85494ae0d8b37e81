#!/bin/bash
# s9 [same|tmpfs]: a home in an overlayfs lower layer (as in a container image). Writes through the overlay (copy-up),
# then umount + mount again (container restart, same upper) and write again, 3 times. Count notes/new timelines.
. /tmp/hostile11/scripts/common.sh
K=${1:-same}; D=$W/s9$K; umount $D/m 2>/dev/null; umount $D/up 2>/dev/null; rm -rf $D; mkdir -p $D/lower $D/up $D/m
[ $K = tmpfs ] && mount -t tmpfs -o size=20M tmpfs $D/up; mkdir -p $D/up/u $D/up/w
trap 'umount $D/m 2>/dev/null; [ $K = tmpfs ] && umount $D/up' EXIT
mkhome $D/lower/h h; pl $D/lower/h list add L >/dev/null; pl $D/lower/h add L x >/dev/null
mnt() { mount -t overlay overlay -o lowerdir=$D/lower,upperdir=$D/up/u,workdir=$D/up/w $D/m; }
tl() { pl $D/m/h status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["summary"])'; }
mnt; echo "before: $(stat -c 'ino=%i birth=%W' $D/m/h/plait.db) $(tl)"
for r in 1 2 3 4; do
  out=$(pl $D/m/h add L r$r 2>&1); out2=$(pl $D/m/h add L r${r}b 2>&1)
  echo "mount $r: notes=$(echo "$out$out2" | grep -c '^note') $(stat -c 'ino=%i birth=%W' $D/m/h/plait.db) store_file=$(sqlite3 $D/m/h/plait.db "select value from meta where key='store_file'") $(tl)"
  umount $D/m; mnt
done
umount $D/m
