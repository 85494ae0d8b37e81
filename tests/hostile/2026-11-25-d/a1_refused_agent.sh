#!/bin/bash
# A/fix 1 (after t3_refused_agent.sh of 2026-11-25-c): X unpairs Y after a good sync. What Y's `plait peers`
# (plain and --json), `plait sync` and agent log say about X; then X trusts Y again: is the mark cleared?
# usage: a1_refused_agent.sh [none|sync|doctor] [SECONDS]: what Y runs between the unpair and starting its agent.
# Also fix 3: the name in Y's sync line / log is the one stored at pairing ("xstored"), not X's Hello name ("X").
. $(dirname $(readlink -f $0))/common.sh; D=$W/a1
setup $D 17800 X Y
XID=$($P id --home $D/X | tail -1); YID=$($P id --home $D/Y | tail -1)
$P pair --trust $XID --name xstored --address 127.0.0.1:17800 --home $D/Y --config $D/Y/config.toml >/dev/null 2>&1 || \
  { $P unpair $XID --home $D/Y >/dev/null; $P pair --trust $XID --name xstored --address 127.0.0.1:17800 --home $D/Y --config $D/Y/config.toml; }
$P list add L --home $D/X >/dev/null; for i in 1 2 3; do $P add L "item $i" --home $D/X >/dev/null; done
agent $D/X 17800; XP=$AGENT_PID; sleep 0.8
echo "--- Y sync (paired):"; $P sync --home $D/Y --config $D/Y/config.toml --peer 127.0.0.1:17800 --timeout 10; echo "rc=$?"
$P unpair $YID --home $D/X
case ${1:-none} in
  sync) echo "--- Y sync after X unpaired Y:"; $P sync --home $D/Y --config $D/Y/config.toml --peer 127.0.0.1:17800 --timeout 10; echo "rc=$?";;
  doctor) echo "--- Y doctor:"; $P doctor --home $D/Y --config $D/Y/config.toml | grep -i -A1 xstored;;
esac
S=${2:-9}; agent $D/Y 17801; YP=$AGENT_PID; sleep $S
echo "--- Y agent log:"; cut -c1-300 $D/Y.log
echo "--- count of 'refused this device' lines in $S s: $(grep -c 'refused this device' $D/Y.log)"
echo "--- Y peers:"; $P peers --home $D/Y
echo "--- Y peers --json (refused_this_device):"; $P peers --home $D/Y --json | python3 -c "import json,sys; [print(p['name'], p.get('refused_this_device'), p.get('state', '')) for p in json.load(sys.stdin)['peers']]"
echo "--- X trusts Y again; after 8 s:"; $P pair --trust $YID --address 127.0.0.1:17801 --home $D/X --config $D/X/config.toml >/dev/null; sleep 8
$P peers --home $D/Y; grep -c 'refused this device' $D/Y.log
echo "--- Y log tail:"; tail -5 $D/Y.log | cut -c1-250
kill $XP $YP; wait $XP $YP 2>/dev/null
