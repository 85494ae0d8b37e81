#!/bin/bash
# E3: N parallel `plait sync` from paired Y against X's agent holding BIG changes (X closes Y's connections beyond 8
# gracefully now). Does any sync say "refused this device", does Y's `peers` say "refuses this device"?
# usage: e3_parallel_sync.sh N [BIG] [RUNS]   (X and a pristine Y are made once in /tmp/hostile5/e3; Y restored per run)
. $(dirname $(readlink -f $0))/common.sh; D=$W/e3; N=${1:-12}; BIG=${2:-20000}; RUNS=${3:-1}
if [ ! -f $D/.ready-$BIG ]; then
  setup $D 17920 X Y
  ( echo "list add Big"; for i in $(seq 1 $BIG); do echo "add Big \"item $i\""; done ) | $P batch --home $D/X >/dev/null
  cp -a $D/Y $D/Y.pristine; touch $D/.ready-$BIG
fi
agent $D/X 17920; XP=$AGENT_PID; sleep 1
for r in $(seq 1 $RUNS); do
  rm -rf $D/Y $D/s*.out; cp -a $D/Y.pristine $D/Y
  pids=""
  for i in $(seq 1 $N); do $P sync --home $D/Y --config $D/Y/config.toml --peer 127.0.0.1:17920 --timeout 60 > $D/s$i.out 2>&1 & pids="$pids $!"; done
  PEAK=0; while kill -0 $pids 2>/dev/null; do t=$(awk '/^Threads/{print $2}' /proc/$XP/status); [ "$t" -gt "$PEAK" ] && PEAK=$t; sleep 0.2; done
  wait $pids
  echo "=== run $r: N=$N BIG=$BIG; X agent peak threads $PEAK; sync outputs (count by line, IDs cut):"
  cat $D/s*.out | grep -v "^this device" | sed 's/[A-Z0-9]\{13\}:[0-9]*/T:n/g' | cut -c1-200 | sort | uniq -c
  echo "--- Y peers:"; $P peers --home $D/Y | cut -c1-200
  $P peers --home $D/Y --json | python3 -c "import json,sys; [print('refused_this_device:', p.get('refused_this_device')) for p in json.load(sys.stdin)['peers']]"
done
echo "--- X log (closed/refused/copied/stopped), count:"; grep -a -i "closed a connection\|refused\|copied\|replaced\|error" $D/X.log | cut -c26-140 | sort | uniq -c
stopagent $XP
