"""C: does `plait pair --connect --timeout T` (and `plait sync --timeout T` against a paired hostile) end by T when the
other side is hostile? usage: b7_connect_timeout.py MODE [T]
MODE: tcp (accepts TCP, never answers TLS), tls (pairing TLS done, then silence), trickle (pairing TLS done, then one
byte of a never-ending frame every 0.5 s), synctrickle (a paired agent side: TLS done, then 1 byte every 0.5 s of a
huge Hello frame; the victim runs `plait sync --peer`)."""
import os, socket, ssl, subprocess, sys, threading, time, struct
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hp import Ident
P = os.environ.get("PLAIT", "/tmp/hostile4/bin/plait-d"); W = "/tmp/hostile4/b7"; PORT = 17895
MODE = sys.argv[1]; T = sys.argv[2] if len(sys.argv) > 2 else "5"
subprocess.run(["bash", "-c", f". {os.path.dirname(os.path.abspath(__file__))}/common.sh; setup {W} {PORT} H V"], check=True)
ident = Ident(f"{W}/H")
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); ls.bind(("127.0.0.1", PORT)); ls.listen(4)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.load_cert_chain(f"{W}/H/cert.pem", f"{W}/H/key.pem"); ctx.verify_mode = ssl.CERT_OPTIONAL
ctx.load_verify_locations(f"{W}/V/cert.pem")
ctx.set_alpn_protocols(["plait-sync/2" if MODE == "synctrickle" else "plait-pair/1"])
stop = False; held = []
def serve():
    ls.settimeout(1)
    while not stop:
        try: raw, _ = ls.accept()
        except socket.timeout: continue
        held.append(raw)
        if MODE == "tcp": continue
        try:
            s = ctx.wrap_socket(raw, server_side=True); held.append(s)
            if MODE in ("trickle", "synctrickle"):
                data = struct.pack(">IB", 16 << 20, 1 if MODE == "synctrickle" else 32)
                for b in data + b"\x0a" * 10000:
                    if stop: break
                    s.send(bytes([b])); time.sleep(0.5)
        except Exception as e: print("server:", type(e).__name__, e)
th = threading.Thread(target=serve, daemon=True); th.start()
if MODE == "synctrickle":
    cmd = [P, "sync", "--home", f"{W}/V", "--config", f"{W}/V/config.toml", "--peer", f"127.0.0.1:{PORT}", "--timeout", T]
else:
    cmd = [P, "pair", "--connect", f"127.0.0.1:{PORT}", "--home", f"{W}/V", "--config", f"{W}/V/config.toml", "--timeout", T]
t0 = time.time()
try:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=float(T) * 4 + 30, input="y\n")
    print(f"{MODE}: rc={r.returncode} after {time.time() - t0:.1f} s (--timeout {T}): {(r.stdout + r.stderr).strip()[-300:]}")
except subprocess.TimeoutExpired:
    print(f"{MODE}: still running after {time.time() - t0:.1f} s (--timeout {T}); killed")
stop = True
for s in held:
    try: s.close()
    except Exception: pass
