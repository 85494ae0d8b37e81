"""E2: a hostile paired device H over X's 8-connections-per-device limit. Homes X (agent on 127.0.0.1:17910), H, Y
(honest, paired with X) under /tmp/hostile5/e2. H first opens 8 sync connections (Hello, agent-style, kept), then:
usage: e2_overlimit.py MODE N SECS
  hold    N more connections, one every 10 ms, TLS done then silent, never closed by H (kept SECS s)
  stream  N more connections, each sending TLS application data without pause (64 KiB writes) for SECS s:
          is the 0.5 s drain bounded when the peer never stops sending?
Every second: X's threads, fds, RSS, CPU; Y runs `plait sync` at SECS/2. Prints X's log line counts."""
import os, socket, ssl, subprocess, sys, threading, time
# hp.py / hserve.py: the fourth tester's raw-protocol helpers; PLAIT (environment) names the binary.
os.environ.setdefault("PLAIT", "/tmp/hostile5/bin/plait-e")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-11-25-d"))
from hp import Ident, Conn, HELLO, NOTIFY, summary_wire
P = os.environ.get("PLAIT", "/tmp/hostile5/bin/plait-e"); W = "/tmp/hostile5/e2"; PORT = 17910
mode, N, SECS = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
subprocess.run(["bash", "-c", f". {os.path.dirname(os.path.abspath(__file__))}/common.sh; setup {W} {PORT} X H Y"], check=True)
X = subprocess.Popen([P, "agent", "--home", f"{W}/X", "--config", f"{W}/X/config.toml", "--no-discovery", "--listen",
                      f"127.0.0.1:{PORT}"], stdout=open(f"{W}/X.log", "ab"), stderr=subprocess.STDOUT)
time.sleep(1.0)
Hid = Ident(f"{W}/H")
def res(pid):
    try:
        st = open(f"/proc/{pid}/status").read()
        th = int([l for l in st.splitlines() if l.startswith("Threads")][0].split()[1])
        rss = int([l for l in st.splitlines() if l.startswith("VmRSS")][0].split()[1])
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return th, len(os.listdir(f"/proc/{pid}/fd")), rss // 1024, round((int(f[11]) + int(f[12])) / 100, 1)
    except Exception as e: return None
keep = []
for i in range(8):
    c = Conn(Hid, PORT, verbose=False); c.hello(one_shot=True); keep.append(c)
def pinger():  # answer Pings on the kept sessions
    for c in keep: c.s.settimeout(0.05)
    while not stop.is_set():
        for c in keep:
            try: c.recv()
            except Exception: pass
        time.sleep(0.2)
stop = threading.Event(); threading.Thread(target=pinger, daemon=True).start()
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
ctx.minimum_version = ssl.TLSVersion.TLSv1_3; ctx.set_alpn_protocols(["plait-sync/2"])
ctx.load_cert_chain(f"{W}/H/cert.pem", f"{W}/H/key.pem")
held = []; ends = []; t0 = time.time()
def streamer(i):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", PORT), timeout=10)); a = time.time(); sent = 0
    chunk = os.urandom(65536)
    try:
        while time.time() - t0 < SECS:
            s.sendall(chunk); sent += len(chunk)
        ends.append((i, "still open when H stopped", round(time.time() - a, 2), sent))
    except Exception as e:
        ends.append((i, type(e).__name__, round(time.time() - a, 2), sent))
    held.append(s)
def opener():
    for i in range(N):
        if mode == "hold":
            try: held.append(ctx.wrap_socket(socket.create_connection(("127.0.0.1", PORT), timeout=10)))
            except Exception as e: ends.append((i, type(e).__name__))
            time.sleep(0.01)
        else: threading.Thread(target=streamer, args=(i,), daemon=True).start(); time.sleep(0.05)
threading.Thread(target=opener, daemon=True).start()
samples = []; ysync = None
while time.time() - t0 < SECS:
    samples.append((round(time.time() - t0), res(X.pid)))
    if ysync is None and time.time() - t0 >= SECS / 2:
        a = time.time()
        r = subprocess.run([P, "sync", "--home", f"{W}/Y", "--config", f"{W}/Y/config.toml", "--peer", f"127.0.0.1:{PORT}",
                            "--timeout", "20"], capture_output=True, text=True)
        ysync = (r.returncode, round(time.time() - a, 2), (r.stdout + r.stderr).strip().splitlines()[-2:])
    time.sleep(1)
stop.set(); time.sleep(0.5)
samples.append(("end", res(X.pid)))
for s in held + [c.s for c in keep]:
    try: s.close()
    except Exception: pass
time.sleep(2); samples.append(("end+2s", res(X.pid)))
X.terminate(); X.wait(timeout=20)
print(f"mode={mode} N={N}: X agent rc={X.returncode}")
print("(t, (threads, fds, RSS MiB, CPU s)):", samples)
print("Y sync during it:", ysync)
from collections import Counter
print("over-limit connections, how they ended (from H):", Counter((e[1]) for e in ends), sorted(ends)[:5])
log = open(f"{W}/X.log", errors="replace").read().splitlines()
print(f"X log: {len(log)} lines; by kind:", Counter(l[l.find(']')+1:][:70] if ']' in l else l[:70] for l in log).most_common(8))
