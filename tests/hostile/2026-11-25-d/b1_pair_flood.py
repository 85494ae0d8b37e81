"""B: hostile connections to `plait pair --listen` (victim V on 127.0.0.1:17830, --timeout TO), from many 127.0.x.y
source addresses, then an honest `plait pair --connect` from F at HONEST s. Prints the honest result, how many lines
the listener printed, and the listener's CPU seconds in windows (a busy poll loop shows as ~1 CPU-s per s).
usage: b1_pair_flood.py MODE RATE DURATION HONEST [TO]
MODE: silent | garbage | half (first half of a real ClientHello, then silence) | hello (a whole ClientHello, then
      silence: answered, so kept before silent ones) | pairsilent (a stranger completes
      TLS with ALPN plait-pair/1, then says nothing) | spin (1 garbage connection at 0 s, then 1 silent one every 9 s
      from 61 s: the drop summary window of the admission is never reset by the pairing listener)
RATE: new connections per second (kept open until DURATION ends, except garbage)."""
import os, socket, ssl, subprocess, sys, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
P = os.environ.get("PLAIT", "/tmp/hostile4/bin/plait-d"); W = "/tmp/hostile4/b1"; PORT = 17830
mode, rate, dur, honest = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
TO = sys.argv[5] if len(sys.argv) > 5 else "120"
subprocess.run(["rm", "-rf", W]); os.makedirs(W)
def mkhome(h, n):
    subprocess.run([P, "init", "--home", h, "--name", n], check=True, capture_output=True)
    open(h + "/config.toml", "w").write('[api]\nlisten = ""\n[discovery]\nenabled = false\n')
for h in ("V", "F", "S"): mkhome(f"{W}/{h}", {"V": "victim", "F": "friend", "S": "stranger"}[h])
def yes_feeder(p):
    try:
        while p.poll() is None: p.stdin.write(b"y\n"); p.stdin.flush(); time.sleep(0.5)
    except Exception: pass
v = subprocess.Popen([P, "pair", "--listen", f"127.0.0.1:{PORT}", "--home", f"{W}/V", "--config", f"{W}/V/config.toml",
                      "--timeout", TO], stdin=subprocess.PIPE, stdout=open(f"{W}/v.out", "wb"), stderr=subprocess.STDOUT)
threading.Thread(target=yes_feeder, args=(v,), daemon=True).start()
time.sleep(0.5)
def cpu(pid):
    if not os.path.exists(f"/proc/{pid}/stat"): return 0.0
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
hello = None
def client_hello():
    global hello
    if hello: return hello
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["plait-pair/1"])
    i, o = ssl.MemoryBIO(), ssl.MemoryBIO(); obj = ctx.wrap_bio(i, o)
    try: obj.do_handshake()
    except ssl.SSLWantReadError: pass
    hello = o.read(); return hello
pctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); pctx.check_hostname = False; pctx.verify_mode = ssl.CERT_NONE
pctx.minimum_version = ssl.TLSVersion.TLSv1_3
pctx.load_cert_chain(f"{W}/S/cert.pem", f"{W}/S/key.pem"); pctx.set_alpn_protocols(["plait-pair/1"])
held = []; opened = 0; errors = 0
def one(kind, i):
    global opened, errors
    s = socket.socket(); s.bind((f"127.0.{2 + i // 250 % 50}.{i % 250 + 1}", 0)); s.settimeout(5)
    try:
        s.connect(("127.0.0.1", PORT)); opened += 1
        if kind == "garbage": s.sendall(os.urandom(300)); s.close(); return
        if kind == "half": h = client_hello(); s.sendall(h[:len(h) // 2])
        if kind == "hello": s.sendall(client_hello())
        if kind == "pairsilent": s = pctx.wrap_socket(s)
        held.append(s)
    except Exception as e:
        errors += 1; s.close()
t0 = time.time(); fres = {}
def friend():
    time.sleep(max(0, honest - (time.time() - t0)))
    a = time.time()
    f = subprocess.Popen([P, "pair", "--connect", f"127.0.0.1:{PORT}", "--home", f"{W}/F", "--config", f"{W}/F/config.toml",
                          "--timeout", "40"], stdin=subprocess.PIPE, stdout=open(f"{W}/f.out", "wb"), stderr=subprocess.STDOUT)
    threading.Thread(target=yes_feeder, args=(f,), daemon=True).start()
    f.wait(); out = open(f"{W}/f.out", errors="replace").read()
    fres.update(rc=f.returncode, secs=round(time.time() - a, 2), out=out)
ft = threading.Thread(target=friend); ft.start()
samples = []; last = (time.time(), cpu(v.pid)); i = 0
if mode == "spin":
    one("garbage", 0); nxt = 61; k = 1
    while time.time() - t0 < dur and v.poll() is None:
        if time.time() - t0 >= nxt: one("silent", k); k += 1; nxt += 9
        time.sleep(0.2)
        if time.time() - last[0] >= 5:
            c = cpu(v.pid); samples.append((round(time.time() - t0), round((c - last[1]) / (time.time() - last[0]), 2))); last = (time.time(), c)
else:
    while time.time() - t0 < dur and v.poll() is None:
        one(mode, i); i += 1
        time.sleep(1 / rate)
        if time.time() - last[0] >= 5:
            c = cpu(v.pid); samples.append((round(time.time() - t0), round((c - last[1]) / (time.time() - last[0]), 2))); last = (time.time(), c)
ft.join()
for s in held:
    try: s.close()
    except Exception: pass
try: v.wait(timeout=TO and float(TO) + 5)
except subprocess.TimeoutExpired: v.kill(); v.wait()
vout = open(f"{W}/v.out", errors="replace").read().splitlines()
print(f"mode={mode} rate={rate}/s opened={opened} connect errors={errors}")
print(f"friend: rc={fres.get('rc')} after {fres.get('secs')} s; last line: {fres.get('out','').strip().splitlines()[-1:]}")
print(f"victim: rc={v.returncode}, {len(vout)} lines printed; CPU-s per s (t, load): {samples}")
from collections import Counter
print("victim lines by kind:", Counter(l[:60] for l in vout).most_common(6))
print("victim last lines:", vout[-3:])
if os.environ.get("SHOWF"): print(fres.get("out"))
