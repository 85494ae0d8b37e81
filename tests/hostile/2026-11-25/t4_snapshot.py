# Hostile baseline folding only the hostile's own timeline, with a snapshot breaking invariants.
# usage: t4_snapshot.py PORT VARIANT
import sys; sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from hp import *
W = os.environ.get("W", "/tmp/hostile/w")
h = Ident(W + "/H")
port, variant = int(sys.argv[1]), sys.argv[2]
T = Timeline(h)
M64 = (1 << 64) - 1
def ok(l, t, s): return fb(5, fv(1, l) + ff64(2, t) + fv(3, s)) if variant != "nostamp" else b""
def lv(lid, title, deleted=0, rank=0, weight=1, stamp=(1, T.id, 1)):
    return fb(2, fb(1, lid) + fs(2, title) + fv(4, deleted) + fb(5, fv(1, stamp[0]) + ff64(2, stamp[1]) + fv(3, stamp[2])) + fv(6, rank) + fv(7, weight))
def iv(iid, lid, text, completed=0, deleted=0, rank=0, weight=1, stamp=(1, None, 1), pt=None, ps=1):
    return fb(3, fb(1, iid) + fb(2, lid) + fs(3, text) + fv(4, completed) + fv(5, deleted) + ff64(6, pt or T.id) + fv(7, ps)
              + fb(8, fv(1, stamp[0]) + ff64(2, stamp[1] or T.id) + fv(3, stamp[2])) + fv(9, rank) + fv(10, weight))
L1 = bytes(15) + b"\x01"; L2 = bytes(15) + b"\x02"; I1 = bytes(15) + b"\x10"; I2 = bytes(15) + b"\x11"
snap = fv(1, 1)
if variant == "dup":      # the same list twice and the same item twice, different contents
    snap += lv(L1, "first") + lv(L1, "second", rank=1) + iv(I1, L1, "one") + iv(I1, L1, "two", rank=1)
elif variant == "huge":   # extreme stamps/rank/weight
    snap += lv(L1, "huge", rank=M64, weight=M64, stamp=(M64, M64, M64)) + iv(I1, L1, "x", rank=M64, weight=M64, stamp=(M64, M64, M64), pt=M64, ps=M64)
elif variant == "unsorted":
    snap += lv(L2, "b") + lv(L1, "a") + iv(I2, L1, "y") + iv(I1, L2, "x")
elif variant == "itemislist":  # an item whose list is itself / an item ID used as a list
    snap += lv(L1, "l") + iv(L1, L1, "self") + iv(I1, I2, "orphan-in-missing-list")
elif variant == "badid":
    snap += lv(b"\x01\x02", "short") + iv(b"", b"\x01" * 40, "bad")
elif variant == "deletedlive":  # completed+deleted item with rank in a deleted list
    snap += lv(L1, "gone", deleted=1) + iv(I1, L1, "zombie", completed=1, deleted=1, rank=5)
elif variant == "format":
    snap = fv(1, 2) + lv(L1, "future")
elif variant == "garbage":
    snap = b"\xff\xff\xff\xff"
elif variant == "stampwin":  # tombstones with a giant stamp for items we learn from the victim
    got, _ = fetch_all(h, port)
    for b in got:
        c = parse_change(b)
        if c["kind"] == "item.create":
            f = decode(c["payload"]); iid = get(f, 1); lid = get(f, 2)
            snap += iv(iid, lid, "deleted by H", deleted=1, stamp=((1 << 62), T.id, 1), weight=M64)
    # (IDs must be ascending; keep it simple: one item is enough)
bl = baseline_bytes([dict(timeline=T.id, seq=1, head_hash=T.changes[0][1], head_lamport=1, certificate=h.cert_der)], 1, snapshot=snap)
bsum = {T.id: 1}
c = Conn(h, port)
c.hello(summary=bsum, heads={T.id: (1, T.changes[0][1])}, baseline_summary=bsum, baseline_digest=H(bl))
serve_session(c, [], bsum, give_baseline=chunks_for(bl, bsum))
