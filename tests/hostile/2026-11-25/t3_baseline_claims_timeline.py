# Hostile baseline claims honest C's timeline TC (not yet held by the victim) with the hostile's certificate and a
# bogus head hash, then appends changes to TC signed with the hostile key.
# usage: t3...py VICTIM_PORT TC_TEXT TC_SEQ
import sys; sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from hp import *
W = os.environ.get("W", "/tmp/hostile/w")
h = Ident(W + "/H")
port, TC, n = int(sys.argv[1]), tl_parse(sys.argv[2]), int(sys.argv[3])
bogus = H(b"bogus head")
bl = baseline_bytes([dict(timeline=TC, seq=n, head_hash=bogus, head_lamport=n, certificate=h.cert_der)], n)
bsum = {TC: n}
# forged continuation of TC, signed by hostile key
lid = os.urandom(16)
c1 = change_bytes(TC, n + 1, n + 1, bogus, "list.create", p_list_create(lid, "forged as C"))
c2 = change_bytes(TC, n + 2, n + 2, H(c1), "item.create", p_item_create(os.urandom(16), lid, "C never wrote this"))
give = changes_payload([(c1, None), (c2, h.sign_hash(H(c2)))])
summ = {TC: n + 2}
c = Conn(h, port)
c.hello(summary=summ, heads={TC: (n + 2, H(c2))}, baseline_summary=bsum, baseline_digest=H(bl))
serve_session(c, [give], summ, give_baseline=chunks_for(bl, bsum))
