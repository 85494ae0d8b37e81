#!/bin/bash
# c2_own_change_rot.sh: a's own change holding 'own-5' (never synced: b is offline) has one bit flipped in its
# text ('own-5' -> 'own-u'). What do show, doctor, repair say; is the loss named ("unrecoverable"), never "nothing
# lost"; and when b comes online, what converges?
. $(dirname $(readlink -f $0))/common.sh
D=$W/c2; setup $D 18132 a b; A=$D/a
pl $A list add L >/dev/null; agent $D/b 18133; BP=$AGENT_PID; sleep 0.5; pl $A sync --no-discovery >/dev/null; stopagent $BP
for i in $(seq 1 10); do pl $A add L own-$i >/dev/null; done
python3 - $A/plait.db <<'PY'
import sqlite3, sys
db = sys.argv[1]
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
pages = [r[0] for r in con.execute("select pageno from dbstat where name='changes'")]
con.close()
data = bytearray(open(db, 'rb').read())
for p in pages:
    i = data.find(b"own-5", (p - 1) * 4096, p * 4096)
    if i >= 0:
        data[i + 4] ^= 0x40; open(db, 'r+b').write(data); print(f"flipped: own-5 -> own-u at byte {i+4} (page {p})"); break
PY
echo "--- show: $(pl $A show 2>&1 | grep -oE 'own-[0-9u]+' | tr '\n' ' ')"
echo "--- doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor|peer device|→ start' | cut -c1-330
echo "--- repair"; pl $A repair 2>&1 | cut -c1-330
echo "--- show: $(pl $A show 2>&1 | grep -oE 'own-[0-9u]+' | tr '\n' ' ')"
echo "--- add"; pl $A add L own-11 2>&1 | cut -c1-250
agent $D/b 18133; BP=$AGENT_PID; sleep 0.5
echo "--- sync"; pl $A sync --no-discovery 2>&1 | cut -c1-300
echo "a: $(items $A | tr '\n' ' ')"; echo "b: $(items $D/b | tr '\n' ' ')"
echo "--- doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor' | cut -c1-330
stopagent $BP
