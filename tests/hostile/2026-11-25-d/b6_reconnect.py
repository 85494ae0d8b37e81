"""B: a paired hostile H reconnects to the victim's agent as fast as it can (TLS, Hello, close) for SECS s, at most
RATE sessions/s. Counts V's fdatasync/pwrite64 (strace) and sessions. usage: b6_reconnect.py RATE SECS [hello|rst]
hello: H sends its Hello and closes after V's; rst: H resets right after the TLS handshake (no Hello)."""
import os, subprocess, sys, time, struct
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hp import *
P = os.environ.get("PLAIT", "/tmp/hostile4/bin/plait-d"); W = "/tmp/hostile4/b6"; PORT = 17890
RATE, SECS = float(sys.argv[1]), float(sys.argv[2]); MODE = sys.argv[3] if len(sys.argv) > 3 else "hello"
subprocess.run(["bash", "-c", f". {os.path.dirname(os.path.abspath(__file__))}/common.sh; setup {W} {PORT} V H; $P list add L --home {W}/V >/dev/null"], check=True)
V = f"{W}/V"
ag = subprocess.Popen([P, "agent", "--home", V, "--config", f"{V}/config.toml", "--no-discovery", "--listen", f"127.0.0.1:{PORT}"],
                      stdout=open(f"{W}/V.log", "wb"), stderr=subprocess.STDOUT)
try:
    time.sleep(1.5); ident = Ident(f"{W}/H")
    st = subprocess.Popen(["strace", "-f", "-c", "-e", "trace=pwrite64,fdatasync,fsync", "-p", str(ag.pid), "-o", f"{W}/strace.txt"],
                          stderr=subprocess.DEVNULL)
    time.sleep(0.5); t0 = time.time(); n = ok = 0; errs = {}
    while time.time() - t0 < SECS:
        n += 1
        try:
            c = Conn(ident, PORT, verbose=False)
            if MODE == "hello": c.hello(one_shot=False); ok += 1
            c.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)); c.s.close()
        except Exception as e: errs[type(e).__name__] = errs.get(type(e).__name__, 0) + 1
        time.sleep(max(0, n / RATE - (time.time() - t0)))
    el = time.time() - t0; time.sleep(1.5)
    st.send_signal(2); st.wait()
    print(f"MODE={MODE}: {n} connections in {el:.1f} s, {ok} reached V's Hello; errors {errs}")
    print(open(f"{W}/strace.txt").read())
    print(subprocess.run([P, "peers", "--home", V], capture_output=True, text=True).stdout[:300])
finally:
    ag.terminate(); ag.wait()
log = open(f"{W}/V.log", errors="replace").read().splitlines()
from collections import Counter
print(f"V log: {len(log)} lines;", Counter(" ".join(l.split()[3:6])[:50] for l in log).most_common(5))
