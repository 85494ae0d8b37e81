#!/bin/bash
# many.sh SLOT SEED... : runs chaos.py for each seed in turn on port slot SLOT; outputs in /tmp/hostile10/runs/SEED.out
S=$1; shift
for seed in "$@"; do
  timeout 600 python3 $(dirname $(readlink -f $0))/chaos.py $seed --slot $S --seconds ${SECS:-150} $EXTRA > /tmp/hostile10/runs/$seed.out 2>&1
  grep RESULT /tmp/hostile10/runs/$seed.out || echo "RESULT seed=$seed (no result line, rc=$?)"
done
