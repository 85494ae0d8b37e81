# G7: a pairing started from the page by address, to an address that accepts TCP and then says nothing (a wrong
# port, a busy or hostile service), stays "connecting" for the whole 120 s attempt: the page's Refuse is disabled,
# POST /api/pairing/refuse answers 409 and a new start 409 "a pairing is already running", for 2 minutes.
# Usage: python3 g7_pairing_uncancellable.py
import json, socket, threading, time
import hg

h = hg.make_home("g7", 18073, "127.0.0.1:18074")
agent = hg.start_agent(h)
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 18075)); srv.listen(50)
held = []
threading.Thread(target=lambda: [held.append(srv.accept()) for _ in range(50)], daemon=True).start()
try:
    a = hg.api_addr(h); H = {"Authorization": "Bearer " + hg.token(h)}
    P = lambda path, body={}: (lambda r: (r[0], r[2].decode().strip().replace("\n", " ")[:160]))(hg.req(a, "POST", path, body, H))
    print("start (silent address):", P("/api/pairing/start", {"address": "127.0.0.1:18075"}))
    time.sleep(2)
    print("refuse:", P("/api/pairing/refuse"))
    print("start again:", P("/api/pairing/start", {"address": "127.0.0.1:18075"}))
    t = time.time()
    while json.loads(hg.req(a, "GET", "/api/pairing", None, H)[2])["session"]["state"] == "connecting":
        time.sleep(1)
    print(f"left 'connecting' after {time.time()-t+2:.0f}s:", json.loads(hg.req(a, "GET", "/api/pairing", None, H)[2])["session"])
finally:
    hg.stop_agent(agent); srv.close()
