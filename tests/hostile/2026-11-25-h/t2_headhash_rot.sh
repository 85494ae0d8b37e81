#!/bin/bash
# t2_headhash_rot.sh own|peer: one bit flips in a's timelines.head_hash (derived bookkeeping of the newest change's
# hash) — of a's own timeline (own) or of b's timeline (peer). Then doctor, an edit, syncs both ways: who refuses
# what, and what do doctor, sync and peers say?
. $(dirname $(readlink -f $0))/common.sh
V=${1:-own}; D=$W/t2; setup $D 18139 a b; A=$D/a
pl $A list add L >/dev/null; pl $A add L x1 >/dev/null
agent $D/b 18140; BP=$AGENT_PID; sleep 0.5; pl $A sync --no-discovery >/dev/null; pl $D/b add L b1 >/dev/null; pl $A sync --no-discovery >/dev/null; stopagent $BP
HEX=$(sqlite3 -readonly $A/plait.db "select hex(head_hash) from timelines order by head_seq $([ $V = own ] && echo desc || echo asc) limit 1")
echo "flipping one bit of head_hash $HEX"
python3 - $A/plait.db $HEX <<'PY'
import sys, sqlite3
db, hx = sys.argv[1], bytes.fromhex(sys.argv[2])
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
pages = [r[0] for r in con.execute("select pageno from dbstat where name='timelines'")]
con.close()
data = bytearray(open(db, 'rb').read())
for p in pages:
    i = data.find(hx, (p - 1) * 4096, p * 4096)
    if i >= 0:
        data[i + 31] ^= 1; open(db, 'r+b').write(data); print("flipped byte", i + 31, "in the timelines table (page", p, ")"); break
else:
    print("not found"); sys.exit(1)
PY
echo "integrity: $(sqlite3 -readonly $A/plait.db 'pragma integrity_check' | head -1)"
echo "--- doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor|peer device|→ start' | cut -c1-300
echo "--- add on a, b"; pl $A add L x2 2>&1 | cut -c1-200; pl $D/b add L b2 2>&1 | cut -c1-200
agent $D/b 18140; BP=$AGENT_PID; sleep 0.5
echo "--- sync"; pl $A sync --no-discovery 2>&1 | cut -c1-300; echo "--- sync"; pl $A sync --no-discovery 2>&1 | cut -c1-300
echo "a: $(items $A | tr '\n' ' ')"; echo "b: $(items $D/b | tr '\n' ' ')"
echo "--- doctor a"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor' | cut -c1-300
echo "--- peers b"; pl $D/b peers | cut -c90-300
stopagent $BP
