"""B: a paired hostile H (hp.py) holds NSESS agent sessions (distinct instance nonces) with the victim's agent V and
sends Notify frames as fast as it can for SECS s. Counts V's store writes (strace: pwrite64/fdatasync/fsync of the
agent, all threads) and prints V's `plait peers` row for H.
usage: b2_notify_storm.py NSESS SECS CLAIM
CLAIM: same (H's Notify names V's summary), grow (a new bogus H timeline seq each time), ownahead (V's own timeline
       1000 beyond its head), idle (no Notify at all: the baseline write rate of an idle session)."""
import os, subprocess, sys, threading, time, re
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hp import *
P = os.environ.get("PLAIT", "/tmp/hostile4/bin/plait-d"); PLAIT = P; W = "/tmp/hostile4/b2"; PORT = 17840
NS, SECS, CLAIM = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
subprocess.run(["bash", "-c", f". {os.path.dirname(os.path.abspath(__file__))}/common.sh; setup {W} {PORT} V H; "
                f"$P list add L --home {W}/V >/dev/null; for i in 1 2 3; do $P add L item$i --home {W}/V >/dev/null; done"], check=True)
V = f"{W}/V"
ag = subprocess.Popen([P, "agent", "--home", V, "--config", f"{V}/config.toml", "--no-discovery", "--listen", f"127.0.0.1:{PORT}"],
                      stdout=open(f"{W}/V.log", "wb"), stderr=subprocess.STDOUT)
time.sleep(1.5)
ident = Ident(f"{W}/H")
def vsum():
    out = subprocess.run([P, "status", "--home", V], capture_output=True, text=True).stdout
    s = re.search(r"summary\s+(\S+)", out).group(1)
    return {tl_parse(x.split(":")[0]): int(x.split(":")[1]) for x in s.split(",")}
vs = vsum(); vid = subprocess.run([P, "status", "--home", V], capture_output=True, text=True).stdout
conns = []
import atexit; atexit.register(lambda: (ag.poll() is None) and (ag.terminate(), ag.wait()))
for k in range(NS):
    try:
        c = Conn(ident, PORT, verbose=False)
        c.hello(one_shot=False)
        c.send(WANT, summary_wire(1, c.peer_summary))
        conns.append(c)
    except Exception as e: print(f"session {k}: {type(e).__name__} {e}")
NS = len(conns)
stop = time.time() + SECS; sent = [0] * NS; errs = []
def pump(i, c):
    c.s.settimeout(0.001); n = 0
    mine = tl_parse("ZZZZZZZZZZZZZ") & ((1 << 64) - 1)
    own = min(vs, key=lambda t: -vs[t])  # some V timeline
    try:
        while time.time() < stop:
            try:
                t, f = c.recv()
                if t == WANT: c.send(DONE, b"")
            except (socket.timeout, ssl.SSLWantReadError, TimeoutError): pass
            if CLAIM == "idle": time.sleep(0.05); continue
            for _ in range(50):
                n += 1
                summ = dict(vs)
                if CLAIM == "grow": summ[mine] = n
                if CLAIM == "ownahead": summ[own] = vs[own] + 1000
                c.send(NOTIFY, summary_wire(1, summ)); sent[i] += 1
    except Exception as e: errs.append(f"{i}: {type(e).__name__} {e}")
st = subprocess.Popen(["strace", "-f", "-c", "-e", "trace=pwrite64,fdatasync,fsync", "-p", str(ag.pid), "-o", f"{W}/strace.txt"])
time.sleep(0.5)
th = [threading.Thread(target=pump, args=(i, c)) for i, c in enumerate(conns)]
t0 = time.time(); [t.start() for t in th]
samples = []
while time.time() < stop:
    time.sleep(2)
    out = subprocess.run([P, "peers", "--home", V, "--json"], capture_output=True, text=True).stdout
    samples.append(out)
[t.join() for t in th]
st.send_signal(2); st.wait()
print(f"NSESS={NS} CLAIM={CLAIM}: Notify sent {sum(sent)} in {time.time() - t0:.1f} s; errors: {errs[:3]}")
print("strace (agent, all threads) during the storm:"); print(open(f"{W}/strace.txt").read())
print("V peers:"); print(subprocess.run([P, "peers", "--home", V], capture_output=True, text=True).stdout)
print("V doctor (peers part):"); print("\n".join(l for l in subprocess.run([P, "doctor", "--home", V, "--config", f"{V}/config.toml"], capture_output=True, text=True).stdout.splitlines() if "H" in l or "peer" in l.lower())[:1500])
for c in conns:
    try: c.s.close()
    except Exception: pass
time.sleep(1)
ag.terminate(); ag.wait()
log = open(f"{W}/V.log", errors="replace").read().splitlines()
print(f"V log: {len(log)} lines; last 6:"); print("\n".join(l[:250] for l in log[-6:]))
