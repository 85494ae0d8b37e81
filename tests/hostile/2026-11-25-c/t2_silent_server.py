"""A 'peer' at 127.0.0.1:PORT that accepts TCP and then says nothing (tls=0), or completes TLS with HHOME's key and
then says nothing (tls=1). The victim's `plait sync --peer --timeout 5` must end. usage: t2_silent_server.py VHOME HHOME PORT tls"""
import sys, os, subprocess, threading, time, socket
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hserve import *
V, HH, PORT, TLS = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
ident = Ident(HH); ctx, ls = listen(ident, PORT)
def srv():
    raw, _ = ls.accept()
    if TLS:
        s = ctx.wrap_socket(raw, server_side=True)
    time.sleep(70)
threading.Thread(target=srv, daemon=True).start()
t0 = time.time()
r = subprocess.run([PLAIT, "sync", "--home", V, "--peer", f"127.0.0.1:{PORT}", "--timeout", "5"], capture_output=True, text=True, timeout=100)
print(f"tls={TLS}: rc={r.returncode} after {time.time()-t0:.1f} s: {(r.stdout+r.stderr).strip()[:300]}")
