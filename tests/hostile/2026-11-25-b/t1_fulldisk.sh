#!/bin/bash
# Victim home on a small tmpfs; pull S's 60k baseline until the disk is full; then grow the tmpfs and sync again.
# usage: t1_fulldisk.sh SIZE   (S agent on 17500 running; k/V0 pristine victim)
P=${PLAIT:-/tmp/hostile/plait}; W=/tmp/hostile/t2/k; M=$W/tmpfs; SZ=${1:-10M}
mkdir -p $M; mount -t tmpfs -o size=$SZ tmpfs $M || exit 1
cp -a $W/V0 $M/V; V=$M/V
echo "== tmpfs $SZ: $(df -h $M | tail -1)"
$P sync --home $V --peer 127.0.0.1:17500 --no-discovery; echo "sync rc=$?"
df -h $M | tail -1; ls -la $V | grep plait; echo "add after failure: $($P add x y --home $V 2>&1 | tail -1)"
$P doctor --home $V --listen 127.0.0.1:17502 2>&1 | grep -E '^  (ok|WARN|FAIL) +(store|baseline|materialized|hash chains)'
echo "integrity: $(sqlite3 $V/plait.db 'PRAGMA integrity_check' 2>&1 | head -2)"
$P status --home $V 2>&1 | sed -n 4,7p
echo "show == V0: $([ "$($P show --json --home $V | sha256sum)" = "$($P show --json --home $W/V0 | sha256sum)" ] && echo yes || echo NO)"
mount -o remount,size=128M $M; echo "== grown: $(df -h $M | tail -1)"
$P sync --home $V --peer 127.0.0.1:17500 --no-discovery; echo "sync rc=$?"
$P doctor --home $V --listen 127.0.0.1:17502 2>&1 | grep -E '^  (ok|WARN|FAIL) +(store|baseline|materialized|hash chains)'
echo "show == S: $([ "$($P show --json --home $V | sha256sum)" = "$($P show --json --home $W/S | sha256sum)" ] && echo yes || echo NO)"
umount $M
