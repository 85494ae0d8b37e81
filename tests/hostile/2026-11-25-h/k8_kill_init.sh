#!/bin/bash
# k8_kill_init.sh FILE: `plait init` SIGKILLed while strace holds it just after it opens FILE (key.pem, cert.pem,
# plait.db, plait.db-journal, plait.db-wal, api-token). Then: what do status, doctor and `init` again say; can the
# half-made home be finished or must it be deleted by hand?
. $(dirname $(readlink -f $0))/common.sh
F=${1:-plait.db-journal}; D=$W/k8; rm -rf $D; mkdir -p $D; A=$D/a
strace -f -o /dev/null -P $A/$F -e trace=openat -e inject=openat:delay_exit=3000000:when=1 $P init --home $A --name a > $D/init.out 2>&1 & SP=$!
sleep 1.5; pkill -KILL -f "plait-h init --home $A"; wait $SP 2>/dev/null
echo "killed just after opening $F; home: $(ls -s $A | tail -n +2 | tr '\n' ' ')"
echo "\$ plait status: $(pl $A status 2>&1 | head -2 | tr '\n' ' ' | cut -c1-300)"
echo "\$ plait doctor:"; $P doctor --home $A 2>&1 | grep -E 'FAIL|→' | cut -c1-300
echo "\$ plait init again: $($P init --home $A --name a 2>&1 | head -2 | tr '\n' ' ' | cut -c1-300)"
echo "\$ plait status: $($P status --home $A 2>&1 | head -2 | tr '\n' ' ' | cut -c1-200)"
