#!/bin/bash
# t1_trust_rot.sh: one bit of b's Device ID in a's peers table (the trust store, source data) flips at rest.
# What do peers, doctor, sync (both ways, agents running) say?
. $(dirname $(readlink -f $0))/common.sh
D=$W/t1; setup $D 18134 a b; A=$D/a
pl $A list add L >/dev/null; pl $A add L x >/dev/null
BID=$(pl $D/b id | tail -1)
python3 - $A/plait.db "$BID" <<'PY'
import sys
db, bid = sys.argv[1], sys.argv[2].encode()
data = bytearray(open(db, 'rb').read())
i = data.find(bid)
assert i >= 0
data[i + 10] ^= 0x01; open(db, 'r+b').write(data)
print(f"flipped one bit of {bid[:10].decode()}… at byte {i+10}: now {bytes(data[i:i+16]).decode(errors='replace')}")
PY
echo "sqlite integrity: $(sqlite3 -readonly $A/plait.db 'pragma integrity_check' | head -1)"
echo "--- peers"; pl $A peers 2>&1 | cut -c1-200
echo "--- doctor"; pl $A doctor 2>&1 | grep -vE '^  ok|^plait doctor' | cut -c1-300
agent $D/b 18135; BP=$AGENT_PID; agent $A 18134; AP=$AGENT_PID; sleep 2
echo "--- sync"; pl $A sync --no-discovery 2>&1 | cut -c1-300
echo "b: $(items $D/b | tr '\n' ' ')"
stopagent $AP; stopagent $BP
grep -hE 'error|warn' $A.log $D/b.log | cut -d' ' -f2- | cut -c1-250 | sort | uniq -c | head -5
