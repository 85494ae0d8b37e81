# G3: connections that send a request head with a chunked body and then one body byte every INTERVAL seconds are
# never closed (the 30 s idle timeout counts any body part as activity), with no credential at all: the agent
# answers 401 at once and goes on reading the body. Each holds a descriptor in the agent for as long as the sender
# likes. With FD_LIMIT set the agent is started with that hard open-file limit (as under a service manager's
# LimitNOFILE) and N connections above it: then show what an honest `plait gui`, the page and a peer get.
# Usage: python3 g3_body_trickle.py N SECONDS [INTERVAL] [FD_LIMIT]
import os, resource, socket, sys, time, subprocess, json
import hg

n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
secs = int(sys.argv[2]) if len(sys.argv) > 2 else 75
interval = float(sys.argv[3]) if len(sys.argv) > 3 else 10
fd_limit = int(sys.argv[4]) if len(sys.argv) > 4 else 0
resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
pre = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))) if fd_limit else None
h = hg.make_home("g3", 18031, "127.0.0.1:18032")
agent = hg.start_agent(h, preexec=pre)
socks = []
try:
    a = hg.api_addr(h)
    host, port = a.split(":")
    print("agent before:", hg.res(agent.pid))
    head = (f"POST /api/show HTTP/1.1\r\nHost: {a}\r\nContent-Type: application/json\r\n"
            f"Transfer-Encoding: chunked\r\n\r\n").encode()
    for i in range(n):
        try:
            s = socket.create_connection((host, int(port)), timeout=5)
            s.sendall(head + b"1\r\nx\r\n")
            s.setblocking(False)
            socks.append(s)
        except OSError as e:
            print("connect", i, "failed:", e)
            break
    time.sleep(1)
    first = b""
    try:
        first = socks[0].recv(200)
    except BlockingIOError:
        pass
    print("first answer:", first.split(b"\r\n")[0], "| opened", len(socks), "| agent:", hg.res(agent.pid))
    probes = []

    def probe():
        # an honest client while the trickle goes on
        time.sleep(12)
        t = time.time()
        try:
            st, _, d = hg.req(a, "GET", "/app.js", timeout=secs)
            probes.append(f"GET /app.js (the page): {st} after {time.time()-t:.1f}s")
        except Exception as e:
            probes.append(f"GET /app.js (the page): {type(e).__name__} {e} after {time.time()-t:.1f}s")

    def probe_cli():
        time.sleep(12)
        t = time.time()
        r = hg.run("gui", home=h, check=False)
        probes.append(f"plait gui: exit {r.returncode} after {time.time()-t:.1f}s: {(r.stdout + r.stderr).strip()[:120]}")
        t = time.time()
        r = hg.run("list", "add", "Probe", home=h, check=False)
        probes.append(f"plait list add: exit {r.returncode} after {time.time()-t:.1f}s: {(r.stdout + r.stderr).strip()[:120]}")

    import threading
    if fd_limit:
        threading.Thread(target=probe, daemon=True).start()
        threading.Thread(target=probe_cli, daemon=True).start()
    start = time.time()
    while time.time() - start < secs:
        time.sleep(interval)
        alive = 0
        for s in socks:
            try:
                s.send(b"1\r\nx\r\n")
                alive += 1
            except OSError:
                pass
        print(f"t={time.time()-start:5.0f}s connections still accepted by the agent: {alive} | agent: {hg.res(agent.pid)}")
        if fd_limit:
            # keep the agent's accept queue full: whatever descriptor the agent frees goes to one of these
            for _ in range(60):
                try:
                    s = socket.socket(); s.setblocking(False)
                    s.connect_ex((host, int(port)))
                    socks.append(s)
                except OSError:
                    break
    for p in probes:
        print("  while trickling:", p)
    if fd_limit and not any(p.startswith("GET") for p in probes):
        print(f"  while trickling: GET /app.js (the page) sent at t=12s, not answered by t={secs}s")
    print("agent log tail:")
    print("".join(open(h + ".log").readlines()[-5:])[-1500:])
finally:
    for s in socks:
        s.close()
    time.sleep(1)
    print("after closing:", hg.res(agent.pid))
    hg.stop_agent(agent)
