# Hostile H sends changes / baselines claiming to end or supersede honest C's timeline, to victim A (area 2).
# usage: t2_timeline.py A_PORT C_TIMELINE_TEXT CASE...     W env = homes dir
import sys; sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from hp import *
W = os.environ.get("W", "/tmp/hostile/t2/s")
h = Ident(W + "/H"); cI = Ident(W + "/C")
port, TC = int(sys.argv[1]), tl_parse(sys.argv[2])
got, c0 = fetch_all(h, port)
chs = [parse_change(b) for b in got]
tc = sorted([x for x in chs if x["timeline"] == TC], key=lambda x: x["seq"])
head = tc[-1]; maxlam = max(x["lamport"] for x in chs)
print(f"A holds {tl_text(TC)} up to {head['seq']} (lamport {head['lamport']}), max lamport {maxlam}")

def send_changes(parts, summ, heads):
    c = Conn(h, port)
    c.hello(summary=summ, heads=heads)
    serve_session(c, [changes_payload(parts)], summ)

def own_timeline(supersedes=None, nonce=None):
    T = Timeline(h, nonce=nonce, supersedes=supersedes, lamport0=0)
    return T

for name in sys.argv[3:]:
    print(f"== case {name}")
    if name in ("endC_Hsig", "endC_nosig", "editC_Hsig"):
        kind, pl = ("timeline.end", b"") if name.startswith("end") else ("item.create", p_item_create(os.urandom(16), os.urandom(16), "forged"))
        b = change_bytes(TC, head["seq"] + 1, maxlam + 1, head["hash"], kind, pl)
        sig = h.sign_hash(H(b)) if "Hsig" in name else None
        send_changes([(b, sig)], {TC: head["seq"] + 1}, {TC: (head["seq"] + 1, H(b))})
    elif name in ("supersedeC", "supersedeC_low", "supersedeUnknown", "supersedeC_badhash"):
        if name == "supersedeC": sup = (TC, head["seq"], head["hash"])
        elif name == "supersedeC_low": sup = (TC, 1, tc[0]["hash"])
        elif name == "supersedeC_badhash": sup = (TC, head["seq"], H(b"x"))
        else: sup = (int.from_bytes(os.urandom(8), "big"), 3, H(b"y"))
        T = own_timeline(supersedes=sup)
        T.add("list.create", p_list_create(os.urandom(16), "H " + name))
        send_changes([(b, None) for b, _ in T.changes[:-1]] + [(T.changes[-1][0], h.sign_hash(T.changes[-1][1]))],
                     {T.id: len(T.changes)}, {T.id: T.head})
    elif name.startswith("badbegin_"):
        v = name[9:]
        nonce = os.urandom(16)
        cert = cI.cert_der if v == "Ccert" else h.cert_der
        pl = fb(1, cert) + fb(2, nonce)
        if v == "seq0": pl += fb(3, ff64(1, TC) + fv(2, 0) + fb(3, head["hash"]))
        if v == "hash31": pl += fb(3, ff64(1, TC) + fv(2, head["seq"]) + fb(3, head["hash"][:31]))
        if v == "nonce15": nonce = nonce[:15]; pl = fb(1, cert) + fb(2, nonce)
        if v == "trunc": pl = pl[:-5]
        if v == "Ccert": pl += fb(3, ff64(1, TC) + fv(2, head["seq"]) + fb(3, head["hash"]))
        tid = int.from_bytes(H(b"plait-timeline" + cert + nonce)[:8], "big")
        if v == "wrongid": tid ^= 1
        b = change_bytes(tid, 1, 1, bytes(32), "timeline.begin", pl)
        send_changes([(b, h.sign_hash(H(b)))], {tid: 1}, {tid: (1, H(b))})
    elif name in ("bl_supersede_companion", "bl_ended_beyond", "bl_supersede_nocompanion"):
        # baseline folding C's timeline at A's head, with superseded_at and a companion timeline of C's cert
        ents = [dict(timeline=TC, seq=1, head_hash=tc[0]["hash"], head_lamport=tc[0]["lamport"],
                     certificate=cI.cert_der)]     # folds only C's begin (no state), so an empty snapshot is harmless
        bsum = {TC: 1}
        if name == "bl_supersede_companion" or name == "bl_supersede_nocompanion":
            ents[0]["superseded_at"] = head["seq"]
        if name == "bl_supersede_companion":
            tx = int.from_bytes(H(b"plait-timeline" + cI.cert_der + os.urandom(16))[:8], "big")
            ents.append(dict(timeline=tx, seq=1, head_hash=H(b"companion"), head_lamport=1, certificate=cI.cert_der))
            bsum[tx] = 1
        if name == "bl_ended_beyond":
            ents[0] = dict(timeline=TC, seq=head["seq"] + 1, head_hash=H(b"fake end"), head_lamport=maxlam + 1,
                           certificate=cI.cert_der, ended=True)
            bsum[TC] = head["seq"] + 1
        ml = max(e["head_lamport"] for e in ents)
        # snapshot: empty lists state would be joined; keep the honest snapshot by sending an empty snapshot
        bl = baseline_bytes(ents, ml, snapshot=fv(1, 1))
        c = Conn(h, port)
        c.hello(summary=bsum if name != "bl_ended_beyond" else bsum, heads={t: (s, [e for e in ents if e["timeline"] == t][0]["head_hash"]) for t, s in bsum.items()},
                baseline_summary=bsum, baseline_digest=H(bl))
        serve_session(c, [], bsum, give_baseline=chunks_for(bl, bsum))
