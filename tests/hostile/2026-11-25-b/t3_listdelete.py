# Area 3: list.delete v1/v2 edge cases from hostile H to victim A (agent), with honest C (plait sync) and D (agent).
# usage: t3_listdelete.py CASE...    env W (homes dir, default /tmp/hostile/t2/l), ports A 17520 D 17523
import sys, json, random; sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from hp import *
W = os.environ.get("W", "/tmp/hostile/t2/l"); AP, DP = 17520, 17523
SEED = int(os.environ.get("SEED", "3")); random.seed(SEED); print("seed", SEED)
h = Ident(W + "/H")
def p(*a):
    rc, out = run(*a); return out
def csync(): return p("sync", "--home", W + "/C", "--peer", f"127.0.0.1:{AP}", "--no-discovery")
def show(home, lst): 
    rc, out = run("show", lst, "--home", W + "/" + home, "--json"); return out
def items(home, lst):
    try: d = json.loads(show(home, lst))
    except Exception: return show(home, lst)[:200]
    out = []
    def walk(o):
        if isinstance(o, dict):
            if "text" in o: out.append(o["text"] + ("" if not o.get("deleted") else "(del)"))
            for v in o.values(): walk(v)
        elif isinstance(o, list):
            for v in o: walk(v)
    walk(d); return sorted(out)
def state():
    got, c = fetch_all(h, AP)
    chs = [parse_change(b) for b in got]
    m = max(chs, key=lambda x: x["lamport"])
    heads = {}
    for x in chs:
        if x["timeline"] not in heads or x["seq"] > heads[x["timeline"]]["seq"]: heads[x["timeline"]] = x
    return chs, m, heads
def list_id(home, title):
    rc, out = run("lists", "--home", W + "/" + home, "--json")
    for l in json.loads(out)["lists"]:
        if l["title"] == title: return bytes.fromhex(l["id"].replace("-", ""))
    raise KeyError(title)
def send(T, frm=1):
    c = Conn(h, AP, verbose=False)
    c.hello(summary={T.id: len(T.changes)}, heads={T.id: T.head})
    log = serve_session(c, [T.batch(frm)], {T.id: len(T.changes)})
    for t, f in log:
        if t == CLOSE: print("   A closed:", get(f, 1, b"").decode()[:300])
TC = tl_parse(p("status", "--home", W + "/C").split("timeline")[1].split()[0])
HT = None
def htl():
    global HT
    if HT is None:
        chs, m, heads = state()
        HT = Timeline(h)      # begin at Lamport 1
        send(HT)
    return HT
def delete_change(lid, obs_payload, version):
    chs, m, heads = state()
    T = htl(); n0 = len(T.changes)
    T.add("list.delete", fb(1, lid) + obs_payload, lamport=m["lamport"] + 1, witness=(m["timeline"], m["seq"]), version=version)
    send(T, n0 + 1)
def v1obs(entries): return b"".join(fb(2, ff64(1, t) + fv(2, s)) for t, s in entries)
def v2obs(entries): return b"".join(fb(2, ff64(1, t) + fv(2, s) + fb(3, hh)) for t, s, hh in entries)

for case in sys.argv[1:]:
    print(f"== case {case}")
    L = "L-" + case.replace(":", "-") + "-" + str(SEED)
    empty = case.startswith("e:")          # e:CASE = the same with an empty list (no items at all)
    if empty: case = case[2:]
    p("list", "add", L, "--home", W + "/C")
    if not empty: p("add", L, "before-1", "--home", W + "/C"); p("add", L, "before-2", "--home", W + "/C")
    csync()
    for i in range(5): p("add", "Dbump", f"d{case}{i}", "--home", W + "/D")   # D raises Lamport, pushes to A by agent
    time.sleep(2)
    lid = list_id("A", L)
    chs, m, heads = state(); hc = heads[TC]
    if case.startswith("v1far:"):
        delete_change(lid, v1obs([(TC, int(case[6:]))]), 1)
    elif case.startswith("v2far:"):
        delete_change(lid, v2obs([(TC, int(case[6:]), hc["hash"])]), 2)
    elif case == "v2exact":
        delete_change(lid, v2obs([(TC, hc["seq"], hc["hash"])]), 2)
    elif case == "v2below":   # right hash, seq one lower than its change's number
        delete_change(lid, v2obs([(TC, hc["seq"] - 1, hc["hash"])]), 2)
    elif case.startswith("v2bogus:"):
        delete_change(lid, v2obs([(TC, int(case[8:]), os.urandom(32))]), 2)
    elif case == "v2unknownT":
        delete_change(lid, v2obs([(random.getrandbits(64), 5, os.urandom(32))]), 2)
    elif case == "v2dup":
        delete_change(lid, v2obs([(TC, hc["seq"], hc["hash"]), (TC, hc["seq"], hc["hash"])]), 2)
    elif case == "v1dup":
        delete_change(lid, v1obs([(TC, 1), (TC, 2**64 - 1)]), 1)
    elif case == "v1dup_rev":
        delete_change(lid, v1obs([(TC, 2**64 - 1), (TC, 1)]), 1)
    elif case == "v1unsorted":
        delete_change(lid, v1obs([(2**64 - 1, 3), (TC, hc["seq"])]), 1)
    elif case.startswith("huge:"):
        n = int(case[5:])
        ents = sorted((random.getrandbits(64), random.getrandbits(62), os.urandom(32)) for _ in range(n - 1))
        ents.append((TC, hc["seq"], hc["hash"])); ents.sort()
        t0 = time.time(); delete_change(lid, v2obs(ents), 2); print(f"   sent {n} entries in {time.time()-t0:.1f}s")
    elif case == "v2otherT":   # entry names TC but the hash of another timeline's change (D's head): covers D's chain only
        dh = [x for t, x in heads.items() if t not in (TC,)][0]
        delete_change(lid, v2obs([(TC, hc["seq"], dh["hash"])]), 2)
    else:
        print("unknown case"); continue
    if not empty: p("add", L, "concurrent-C", "--home", W + "/C")     # C has not seen the delete; its Lamport is below it
    print("   C sync:", csync()[-160:])
    if not empty: print("   C adds after-C:", p("add", L, "after-C", "--home", W + "/C"))          # created after C saw the delete
    print("   lists on A:", [(l["title"], l["pending"]) for l in json.loads(p("lists", "--home", W + "/A", "--json"))["lists"] if l["title"] == L])
    csync(); time.sleep(2)
    for home in "ACD":
        print(f"   {home}: {items(home, L)}  digest {p('status', '--home', W + '/' + home).split('digest')[1].split()[0][:12]}")
    print("   log:", [l.split("  ")[0] + " " + l.split("  ")[3][:40] for l in p("log", "--home", W + "/A").splitlines() if L + "'" in l])
