#!/bin/bash
# b2_baseline_text_rot.sh: deterministic form of b1. a and b hold 300 items, both compacted. One bit of a's stored
# baseline flips so that the text "item-69" reads "item-6y" (0x39 -> 0x79). Then doctor, repair, doctor, sync,
# peers on both; then a new device c, paired with a only, syncs from a. Who shows what?
. $(dirname $(readlink -f $0))/common.sh
D=$W/b2; setup $D 18128 a b c; A=$D/a
# c is paired with a only
pl $D/c unpair $(pl $D/b id | tail -1) >/dev/null; pl $D/b unpair $(pl $D/c id | tail -1) >/dev/null
pl $A list add L >/dev/null; ( for i in $(seq 1 300); do echo "add L item-$i"; done ) | pl $A batch >/dev/null
agent $D/b 18129; BP=$AGENT_PID; sleep 0.5; pl $A sync --no-discovery --peer 127.0.0.1:18129 >/dev/null; pl $D/b add L bee >/dev/null; pl $A sync --no-discovery --peer 127.0.0.1:18129 >/dev/null
pl $A compact | tail -1 | cut -c1-100; stopagent $BP; pl $D/b compact | tail -1 | cut -c1-100; agent $D/b 18129; BP=$AGENT_PID; sleep 0.5
python3 - $A/plait.db <<'PY'
import sqlite3, sys
db = sys.argv[1]
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
pages = [r[0] for r in con.execute("select pageno from dbstat where name='baseline'")]
con.close()
data = bytearray(open(db, 'rb').read())
for p in pages:
    base = (p - 1) * 4096
    i = data.find(b"item-69", base, base + 4096)
    if i >= 0 and data[i + 7:i + 8] not in b"0123456789":
        data[i + 6] ^= 0x40
        open(db, 'r+b').write(data); print(f"flipped bit 6 of byte {i+6} (page {p}): item-69 -> item-6y"); break
PY
echo "--- doctor"; pl $A doctor 2>&1 | grep -E 'FAIL|WARN|→' | grep -v 'peer device' | cut -c1-300
echo "--- repair"; pl $A repair 2>&1 | cut -c1-200
echo "--- doctor"; pl $A doctor 2>&1 | grep -E 'FAIL|WARN' | grep -v 'peer device' | cut -c1-300; echo "(doctor rc ${PIPESTATUS[0]})"
echo "--- sync a<->b"; pl $A sync --no-discovery --peer 127.0.0.1:18129 2>&1 | cut -c1-250; echo "rc=${PIPESTATUS[0]}"
echo "a peers: $(pl $A peers | grep 127.0.0.1:18129 | cut -c90-200)"; echo "b peers: $(pl $D/b peers | cut -c90-200)"
echo "digests: a $(pl $A status | grep digest | cut -c11-26)  b $(pl $D/b status | grep digest | cut -c11-26)"
echo "a shows: $(pl $A show | grep -oE 'item-6[y9] ' | tr '\n' ' ')  b shows: $(pl $D/b show | grep -oE 'item-6[y9] ' | tr '\n' ' ')"
echo "--- new device c syncs from a"; agent $A 18128; AP=$AGENT_PID; sleep 0.5
pl $D/c sync --no-discovery --peer 127.0.0.1:18128 2>&1 | cut -c1-200
echo "c shows: $(pl $D/c show | grep -oE 'item-6[y9] ' | tr '\n' ' '); c doctor: $(pl $D/c doctor 2>&1 | grep -cE 'FAIL') FAIL lines"
echo "--- b edits item-69 (done); a and c after sync:"; pl $D/b done item-69 | cut -c1-100; sleep 1; pl $D/c sync --no-discovery --peer 127.0.0.1:18128 >/dev/null 2>&1
echo "a: $(pl $A show | grep -E 'item-6[y9] ' | tr -s ' ' | tr '\n' ' ')  c: $(pl $D/c show | grep -E 'item-6[y9] ' | tr -s ' ' | tr '\n' ' ')"
stopagent $AP; stopagent $BP
