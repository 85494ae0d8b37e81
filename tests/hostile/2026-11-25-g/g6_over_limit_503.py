# G6: an edit whose change is over store.max_change_bytes (a 1.1 MB text, well inside the 8 MiB body limit) is the
# client's error, said rightly by the CLI ("over the limit … Nothing of the batch was written", exit 1), but the API
# answers it 503 Service Unavailable, which tells scripts and proxies to retry; docs/openapi.yaml lists no 503 for
# /api/edit (400 invalid, 413 too large).
# Usage: python3 g6_over_limit_503.py
import hg

h = hg.make_home("g6", 18061, "127.0.0.1:18062")
hg.run("list", "add", "L", home=h)
agent = hg.start_agent(h)
try:
    a = hg.api_addr(h)
    H = {"Authorization": "Bearer " + hg.token(h)}
    for body in ({"op": "add", "list": "L", "text": "x" * 1100000}, {"op": "list.add", "title": "y" * 1100000},
                 {"op": "list.recolor", "list": "L", "color": "z" * 1100000}):
        st, hd, d = hg.req(a, "POST", "/api/edit", body, H)
        print(body["op"], "->", st, d.decode().strip().replace("\n", " "))
finally:
    hg.stop_agent(agent)
