#!/bin/bash
# p1_readonly.sh: a home owned by nobody, made read-only (chmod -R a-w), used as nobody: what each command says,
# and whether any byte of the store changes. Then the same with only the -wal / -shm / home directory read-only.
. $(dirname $(readlink -f $0))/common.sh
D=$W/p1; setup $D 18150 a b; A=$D/a
pl $A list add L >/dev/null; pl $A add L x1 >/dev/null
agent $D/b 18151; BP=$AGENT_PID; sleep 0.5
chown -R nobody:nogroup $D; chmod 755 $D
NB() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
run() { echo "\$ plait $*"; NB $P "$@" --home $A --config $A/config.toml 2>&1 | cut -c1-300; echo "rc=${PIPESTATUS[0]}"; }
case ${1:-all} in
all)  chmod -R a-w $A ;;
dir)  chmod a-w $A ;;
db)   chmod a-w $A/plait.db ;;
wal)  chmod a-w $A/plait.db-wal ;;
shm)  chmod a-w $A/plait.db-shm ;;
nowalshm) rm -f $A/plait.db-wal $A/plait.db-shm; chmod a-w $A ;;
esac
ls -la $A | grep plait.db
sum0=$(md5sum $A/plait.db* | md5sum)
run show; run status; run doctor; run add L x2; run compact; run repair; run sync --no-discovery; run log --limit 1
echo "\$ plait agent (3 s)"; setpriv --reuid=nobody --regid=nogroup --clear-groups $P agent --home $A --config $A/config.toml --no-discovery --listen 127.0.0.1:18150 > $D/a-agent.log 2>&1 & AP=$!; sleep 3; kill -TERM $AP 2>/dev/null; wait $AP; echo "rc=$?"; cut -c1-300 $D/a-agent.log
sum1=$(md5sum $A/plait.db* | md5sum); [ "$sum0" = "$sum1" ] && echo "store files unchanged" || echo "STORE FILES CHANGED"
chmod -R u+w $A; stopagent $BP
