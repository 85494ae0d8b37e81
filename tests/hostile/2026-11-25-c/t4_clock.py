"""Area 4: bad clocks. The hostile home H dials the victim's agent (127.0.0.1:PORT) and sends a new signed
timeline whose changes carry extreme wall times (field 7). Usage: t4_clock.py HHOME PORT TITLE [WALL...]
WALL values: integers (ms since 1970, taken mod 2^64: 2^64-1 reads as -1 in a signed 64-bit field)."""
import sys, os, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hp
from hp import *

HH, PORT, TITLE = sys.argv[1], int(sys.argv[2]), sys.argv[3]
walls = [int(x, 0) % (1 << 64) for x in sys.argv[4:]] or [0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 253402300800000, 253402300799999, -62135596800001 % (1 << 64)]
ident = Ident(HH)
tl = Timeline(ident)
W = iter([walls[0], walls[0]] + walls)
orig = hp.change_bytes
def cb(*a, **k):
    k["wall"] = next(W, walls[-1]); return orig(*a, **k)
hp.change_bytes = cb
# rebuild begin with the first wall
tl = Timeline(ident)
lid = os.urandom(16)
tl.add("list.create", p_list_create(lid, TITLE))
for i, w in enumerate(walls):
    tl.add("item.create", p_item_create(os.urandom(16), lid, f"wall {w}"))
c = Conn(ident, PORT)
c.hello()
log = serve_session(c, [tl.batch()], {tl.id: len(tl.changes)})
print("sent timeline", tl_text(tl.id), "with", len(tl.changes), "changes")
