"""E1: attacks on `plait pair --listen` (victim V on 127.0.0.1:PORT, answers y on stdin), with an honest
`plait pair --connect` from F (answers y) started at HONEST s.  Homes under /tmp/hostile5/e1.
usage: e1_pair.py MODE RATE DURATION HONEST [TO]
MODE (each stranger connection completes TLS with ALPN plait-pair/1 from 127.0.x.y, reads the commitment, then):
  silent     says nothing (kept open until DURATION)          -- RATE connections/s
  trickle    sends a valid PairNonce one byte every 1/RATE s  -- one connection
  garbage    300 random bytes                                 -- RATE connections/s
  wrongtype  a PairReveal frame (type 34) first               -- RATE connections/s
  oversize   a frame header claiming 4 GiB, then 64 KiB       -- RATE connections/s
  sync       a Hello-sized frame of type 1 (sync's Hello)     -- RATE connections/s
  nonce      one stranger sends a valid PairNonce at once and then says yes (RATE ignored; starts at 0.2 s)
  noncerace  one stranger completes TLS at 0.2 s, then sends a valid PairNonce DELAY s (env, default 0) after the
             honest `pair --connect` starts (and says yes)
env VANS: what the victim's user answers (default y), VDELAY: from when (s, default 0); DELAY.
Prints the honest result, the victim's lines, CPU-s per s and open fds of the listener in 2 s windows."""
import os, socket, ssl, struct, subprocess, sys, threading, time, hashlib
# hp.py / hserve.py: the fourth tester's raw-protocol helpers; PLAIT (environment) names the binary.
os.environ.setdefault("PLAIT", "/tmp/hostile5/bin/plait-e")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-11-25-d"))
from hp import Ident, fb, fv, decode, get, H, read_frame
P = os.environ.get("PLAIT", "/tmp/hostile5/bin/plait-e"); W = "/tmp/hostile5/e1"; PORT = int(os.environ.get("PORT", "17900"))
mode, rate, dur, honest = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
TO = sys.argv[5] if len(sys.argv) > 5 else "60"
subprocess.run(["rm", "-rf", W]); os.makedirs(W)
def mkhome(h, n):
    subprocess.run([P, "init", "--home", h, "--name", n], check=True, capture_output=True)
    open(h + "/config.toml", "w").write('[api]\nlisten = ""\n[discovery]\nenabled = false\n')
for h, n in (("V", "victim"), ("F", "friend"), ("S", "stranger")): mkhome(f"{W}/{h}", n)
S = Ident(f"{W}/S")
def yes_feeder(p, ans=b"y\n", delay=0.0):
    time.sleep(delay)
    try:
        while p.poll() is None: p.stdin.write(ans); p.stdin.flush(); time.sleep(0.5)
    except Exception: pass
v = subprocess.Popen([P, "pair", "--listen", f"127.0.0.1:{PORT}", "--home", f"{W}/V", "--config", f"{W}/V/config.toml",
                      "--timeout", TO], stdin=subprocess.PIPE, stdout=open(f"{W}/v.out", "wb"), stderr=subprocess.STDOUT)
threading.Thread(target=yes_feeder, args=(v, os.environ.get("VANS", "y").encode() + b"\n", float(os.environ.get("VDELAY", "0"))), daemon=True).start()
time.sleep(0.5)
def cpu(pid):
    try: f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except Exception: return 0.0
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
def fds(pid):
    try: return len(os.listdir(f"/proc/{pid}/fd"))
    except Exception: return -1
pctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); pctx.check_hostname = False; pctx.verify_mode = ssl.CERT_NONE
pctx.minimum_version = ssl.TLSVersion.TLSv1_3
pctx.load_cert_chain(f"{W}/S/cert.pem", f"{W}/S/key.pem"); pctx.set_alpn_protocols(["plait-pair/1"])
def frame(t, p): return struct.pack(">IB", len(p) + 1, t) + p
readframe = read_frame
held = []; opened = 0; errors = []; lock = threading.Lock(); events = []
def log(*a):
    with lock: events.append(f"{time.time() - t0:6.2f} " + " ".join(map(str, a)))
def one(kind, i):
    global opened
    s = socket.socket(); s.bind((f"127.0.{2 + i // 250 % 50}.{i % 250 + 1}", 0)); s.settimeout(15)
    try:
        s.connect(("127.0.0.1", PORT)); s = pctx.wrap_socket(s); opened += 1
        peer = s.getpeercert(binary_form=True)
        t, f, rest = readframe(s)  # the commitment, sent at once
        if kind == "silent": held.append(s); return
        if kind == "garbage": s.sendall(os.urandom(300))
        if kind == "wrongtype": s.sendall(frame(34, fb(1, os.urandom(32))))
        if kind == "sync": s.sendall(frame(1, os.urandom(200)))
        if kind == "oversize": s.sendall(struct.pack(">I", 0xFFFFFFF0) + b"\x21" + os.urandom(65536))
        if kind == "noncerace":
            while not honest_started.is_set(): honest_started.wait(0.05)
            time.sleep(float(os.environ.get("DELAY", "0")))
        if kind in ("trickle", "nonce", "noncerace"):
            mine = os.urandom(32); fr = frame(33, fb(1, mine)); a = time.time()
            if kind == "trickle":
                for b in fr:
                    s.sendall(bytes([b])); time.sleep(1 / rate)
            else: s.sendall(fr)
            log(f"stranger {kind}: nonce sent ({len(fr)} bytes in {time.time() - a:.1f} s)")
            t, f, rest = readframe(s, rest); log("stranger got type", t)
            if t == 34:
                ni = mine; nr = get(f, 1); certI, certR = S.cert_der, peer
                h = H(b"plait-pair-code" + certI + certR + ni + nr); c = f"{int.from_bytes(h[:8], 'big') % 1000000:06d}"
                log("stranger's code:", c[:3], c[3:]); s.sendall(frame(35, fv(1, 1)))
                t, f, rest = readframe(s, rest); log("stranger got type", t, f)
        try:
            d = s.recv(100); log(f"stranger {kind} #{i}: then", "closed" if not d else f"{len(d)} bytes")
        except Exception as e: log(f"stranger {kind} #{i}: then", type(e).__name__, e)
        held.append(s)
    except Exception as e:
        errors.append(f"{type(e).__name__}: {e}"); log(f"stranger {kind} #{i}: {type(e).__name__}: {e}"); s.close()
t0 = time.time(); fres = {}; honest_started = threading.Event()
def friend():
    time.sleep(max(0, honest - (time.time() - t0)))
    a = time.time(); log("honest connect starts"); honest_started.set()
    f = subprocess.Popen([P, "pair", "--connect", f"127.0.0.1:{PORT}", "--home", f"{W}/F", "--config", f"{W}/F/config.toml",
                          "--timeout", "40"], stdin=subprocess.PIPE, stdout=open(f"{W}/f.out", "wb"), stderr=subprocess.STDOUT)
    threading.Thread(target=yes_feeder, args=(f,), daemon=True).start()
    f.wait(); out = open(f"{W}/f.out", errors="replace").read()
    fres.update(rc=f.returncode, secs=round(time.time() - a, 2), out=out); log("honest ended rc", f.returncode)
ft = threading.Thread(target=friend); ft.start()
samples = []; last = (time.time(), cpu(v.pid)); i = 0; maxfd = 0; threads = []
def sample():
    global last, maxfd
    maxfd = max(maxfd, fds(v.pid))
    if time.time() - last[0] >= 2:
        c = cpu(v.pid); samples.append((round(time.time() - t0), round((c - last[1]) / (time.time() - last[0]), 2), fds(v.pid))); last = (time.time(), c)
if mode == "trickle":
    th = threading.Thread(target=one, args=("trickle", 0)); th.start()
elif mode == "noncerace":
    time.sleep(0.2); th = threading.Thread(target=one, args=("noncerace", 0)); th.start()
elif mode == "nonce":
    time.sleep(0.2); th = threading.Thread(target=one, args=("nonce", 0)); th.start()
while time.time() - t0 < dur and v.poll() is None:
    if mode in ("silent", "garbage", "wrongtype", "oversize", "sync"):
        th = threading.Thread(target=one, args=(mode, i)); th.start(); threads.append(th); i += 1
        threads = [x for x in threads if x.is_alive()]
        while len(threads) > 60: time.sleep(0.01); threads = [x for x in threads if x.is_alive()]
    time.sleep(1 / rate if mode not in ("trickle", "nonce", "noncerace") else 0.1)
    sample()
ft.join()
while time.time() - t0 < dur and v.poll() is None: time.sleep(0.2); sample()
for s in held:
    try: s.close()
    except Exception: pass
try: v.wait(timeout=float(TO) + 5)
except subprocess.TimeoutExpired: v.kill(); v.wait()
vout = open(f"{W}/v.out", errors="replace").read().splitlines()
print(f"mode={mode} rate={rate}/s stranger connections past TLS={opened} stranger errors={len(errors)} {sorted(set(errors))[:3]}")
print(f"friend: rc={fres.get('rc')} after {fres.get('secs')} s; output:"); print("    " + "\n    ".join(fres.get("out", "").strip().splitlines()))
print(f"victim: rc={v.returncode}, {len(vout)} lines printed; max fds {maxfd}; (t, CPU-s/s, fds): {samples}")
print("victim output:"); print("    " + "\n    ".join(l[:230] for l in vout[:25]))
print("events:"); print("    " + "\n    ".join(events[:40]))
print("victim peers:", subprocess.run([P, "peers", "--home", f"{W}/V"], capture_output=True, text=True).stdout.strip()[:600])
