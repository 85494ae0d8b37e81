import sys; sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from hp import *
h = Ident(sys.argv[1]); c = Conn(h, int(sys.argv[2]), verbose=False); c.hello()
print("peer summary", {tl_text(k): v for k, v in c.peer_summary.items()})
for r in c.peer_fork_records:
    f = decode(r); print("record branch", tl_text(get(f,1)), "root", tl_text(get(f,2)), "parent", tl_text(get(f,3)), "base", get(f,4))
c.send(CLOSE, fs(1, "bye"))
