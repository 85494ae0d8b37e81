#!/bin/bash
# E5: odd names given with `pair --trust ID --name NAME` on V for device N; then V's and N's agents (17940/17941)
# connect, N's agent is stopped (so V logs its session ended), and V's log and `peers` are shown with cat -A.
# usage: e5_names.sh CASE   CASE: esc | newline | bidi | long | imitate | label | c1
. $(dirname $(readlink -f $0))/common.sh; B=$W/e5; C=${1:-esc}
rm -rf $B; mkdir -p $B; mkhome $B/V victim; mkhome $B/N other; mkhome $B/F friend
FID=$($P id --home $B/F | tail -1)
case $C in
  esc) NAME=$'evil\e[31mRED\e[0m\e]0;title\a\e[2J' ;;
  newline) NAME=$'nl\n2026-11-25T00:00:00+0000 error plait.agent: [PlaitSync] forged line' ;;
  bidi) NAME=$'friend\u202e)olleh(\u202c\u2066x\u2069' ;;
  long) NAME=$(python3 -c "print('L'*5000)") ;;
  imitate) NAME="friend ($FID)" ;;
  label) NAME="device ${FID:0:7}" ;;  # the label another, unnamed device F gets
  c1) NAME=$(python3 -c "import sys; sys.stdout.write('c1\u009b31m\u0085next\u2028ls\u2029ps')") ;;
esac
NID=$($P id --home $B/N | tail -1); VID=$($P id --home $B/V | tail -1)
$P pair --trust $NID --name "$NAME" --address 127.0.0.1:17941 --home $B/V --config $B/V/config.toml > $B/trust.out 2>&1; echo "pair --trust rc=$?"; cat -A $B/trust.out | cut -c1-300
$P pair --trust $VID --address 127.0.0.1:17940 --home $B/N --config $B/N/config.toml >/dev/null
agent $B/V 17940; VP=$AGENT_PID; agent $B/N 17941; NP=$AGENT_PID; sleep 3
$P add --home $B/N Inbox hello >/dev/null 2>&1; sleep 2
stopagent $NP; sleep 1; stopagent $VP
echo "--- V log lines naming N (cat -A, 300 chars):"; grep -a -v "listening on\|local API\|agent stopped" $B/V.log | cat -A | cut -c1-300
echo "--- V peers (cat -A):"; $P peers --home $B/V | cat -A | cut -c1-300
echo "--- V peers --json name:"; $P peers --home $B/V --json | python3 -c "import json,sys; [print(repr(p.get('name'))[:200], len(p.get('name') or '')) for p in json.load(sys.stdin)['peers']]"
