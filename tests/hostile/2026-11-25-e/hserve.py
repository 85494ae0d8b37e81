"""Hostile *agent* side: a TLS server on 127.0.0.1 with a home's key/cert (ALPN plait-sync/2) that a
`plait sync --peer 127.0.0.1:PORT` of a victim home dials. Built on hp.py (frames, messages, summaries)."""
import os, socket, ssl, struct, subprocess, sys, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hp import *

class ServerConn(Conn):
    def __init__(self, sock, ident, verbose=True):
        self.s = sock; self.ident = ident; self.verbose = verbose; self.buf = b""

def listen(ident, port):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(os.path.join(ident.home, "cert.pem"), os.path.join(ident.home, "key.pem"))
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["plait-sync/2"])
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port)); ls.listen(8)
    return ctx, ls

def accept(ctx, ls, ident, timeout=30):
    ls.settimeout(timeout)
    raw, _ = ls.accept()
    raw.settimeout(30)
    s = ctx.wrap_socket(raw, server_side=True)
    return ServerConn(s, ident)

def hello_payload(ident, summary, heads=None, state_digest=None, one_shot=False, nonce=None):
    p = (pv(1, 2) + pb(2, b"lists") + pv(3, 2) + pb(4, ident.id.encode()) + pb(5, os.environ.get("HNAME", "hostile-agent").encode())
         + summary_wire(6, summary))
    for t, (s, hh) in sorted((heads or {}).items()): p += fb(7, ff64(1, t) + fv(2, s) + fb(3, hh))
    p += pb(9, b"") + fb(10, state_digest or os.urandom(32)) + pv(12, 16 << 20)
    p += fb(14, nonce or os.urandom(16))
    if one_shot: p += fv(16, 1)
    return p

def notify_payload(summary, report=True, digest=None):
    p = summary_wire(1, summary)
    if report: p += fb(2, digest or os.urandom(32))
    return p


def start_sync(home, port, timeout=20):
    """Runs `plait sync --home HOME --peer 127.0.0.1:PORT` on a thread; returns (thread, res): res gets "rc" and
    "out" (stdout and stderr) once it ends."""
    res = {}
    def run():
        r = subprocess.run([PLAIT, "sync", "--home", home, "--peer", f"127.0.0.1:{port}", "--timeout", str(timeout)],
                           capture_output=True, text=True, timeout=120)
        res["rc"] = r.returncode; res["out"] = (r.stdout + r.stderr).strip()
    th = threading.Thread(target=run); th.start()
    return th, res
