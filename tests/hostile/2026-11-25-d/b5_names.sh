#!/bin/bash
# B: odd Unicode certificate names, in pairing (`pair --listen`, user answers y: what is shown and stored) and in the
# pending list (the stranger dials the victim's agent with sync ALPN and is refused). usage: b5_names.sh CASE
# (cases: see b5_certname.py). Prints what the victim showed, and the stored / pending names' sizes.
. $(dirname $(readlink -f $0))/common.sh; B=$W/b5; C=${1:-zwj}
rm -rf $B; mkdir -p $B; python3 $HD/b5_certname.py $B/S $C
mkhome $B/V victim; mkfifo $B/in
$P pair --listen 127.0.0.1:17870 --home $B/V --config $B/V/config.toml --timeout 10 < $B/in > $B/v.out 2>&1 & VP=$!
( sleep 1; echo y; sleep 3 ) > $B/in & EP=$!
sleep 0.3; timeout 20 python3 $HD/hpair.py init $B/S 17870 read,nonce,read,yes,read > /dev/null 2>&1
wait $VP; echo "pair rc=$?"; kill $EP 2>/dev/null; wait $EP 2>/dev/null
echo "--- what pair --listen printed (repr, first 300 chars of each line mentioning the stranger):"
grep -a "other device\|paired with\|connected" $B/v.out | python3 -c "import sys; [print(repr(l.rstrip())[:300], len(l)) for l in sys.stdin]"
show() { python3 -c "
import json,sys
d=json.load(sys.stdin); rows=d.get('peers') or d.get('pending') or []
for p in rows:
    n=p.get('name') or p.get('claimed_name') or ''
    print('name:', repr(n[:60]), '...', len(n), 'code points,', len(n.encode()), 'bytes; longest char (code points):',
          max([0]+[len(c) for c in __import__('re').findall(r'\X', n)]) if False else '')
"; }
echo "--- stored (peers --json):"; $P peers --home $B/V --json | show
$P peers --home $B/V | python3 -c "import sys; [print('plain:', repr(l.rstrip())[:200], len(l)) for l in sys.stdin]"
# pending: a second victim's agent, dialled by the stranger with sync ALPN
mkhome $B/V2 victim2; agent $B/V2 17871; AP=$AGENT_PID; sleep 1
python3 - $B/S <<'PY' 2>/dev/null
import sys, os; sys.path.insert(0, os.environ.get("HD", "."))
PY
PYTHONPATH=$HD timeout 10 python3 -c "
from hp import *
try:
    c = Conn(Ident('$B/S'), 17871, verbose=False); c.hello(one_shot=False)
except Exception as e: print('stranger refused:', type(e).__name__)
"
sleep 0.5
echo "--- pending (peers --pending --json):"; $P peers --home $B/V2 --pending --json > $B/pending.json; python3 -c "
import json; d=json.load(open('$B/pending.json')); print(json.dumps(d)[:600])"
$P peers --home $B/V2 --pending | python3 -c "import sys; [print('plain:', repr(l.rstrip())[:200], len(l)) for l in sys.stdin]"
echo "--- V2 log line about the stranger:"; grep -a "unpaired" $B/V2.log | python3 -c "import sys; [print(repr(l.rstrip())[:250], len(l)) for l in sys.stdin]"
kill $AP; wait $AP 2>/dev/null
