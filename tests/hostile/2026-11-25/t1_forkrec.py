# Forged fork record in Hello naming an honest third device's change as a losing branch.
# usage: t1_forkrec.py VICTIM_PORT TIMELINE_TEXT SEQ BASE [RIVAL=00..01]
import sys; sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from hp import *
W = os.environ.get("W", "/tmp/hostile/w")
h = Ident(W + "/H")
port, ttext, seq, base = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
T = tl_parse(ttext)
got, _ = fetch_all(h, port)
ch = [parse_change(b) for b in got]
target = [c for c in ch if c["timeline"] == T and c["seq"] == seq][0]
rival = bytes(31) + b"\x01"
parent = tl_parse(sys.argv[5]) if len(sys.argv) > 5 else T
br, rec = fork_record(T, parent, base, target["hash"], rival)
print("forged record branch", tl_text(br), "first_hash", target["hash"].hex()[:16], "base", base)
c = Conn(h, port)
c.hello(fork_records=[rec])
serve_session(c, [], {})
