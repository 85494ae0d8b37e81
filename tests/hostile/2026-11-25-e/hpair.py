"""Hostile pairing party (PROTOCOL.md §16, ALPN plait-pair/1), 127.0.0.1 only.
As initiator (dials a `plait pair --listen`):   hpair.py init HHOME PORT SCRIPT
As responder (a `plait pair --connect` dials): hpair.py resp HHOME PORT VICTIMHOME SCRIPT
SCRIPT: comma-separated steps:
  commit / nonce / reveal / yes / no        the honest message of that step (computed from the real certificates)
  badcommit / badreveal / shortnonce / longnonce / zeronce   wrong values
  raw:TYPE:HEX                               any frame
  wait:SECS / read                           sleep / read one frame and print it
  close / rst                                close (TLS close) / drop the socket
"""
import os, socket, ssl, struct, sys, time, hashlib
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hp import Ident, fb, fv, decode, get, H
from cryptography import x509
from cryptography.hazmat.primitives import serialization

COMMIT, NONCE, REVEAL, CONFIRM = 32, 33, 34, 35

def frame(t, p): return struct.pack(">IB", len(p) + 1, t) + p

def code(certI, certR, ni, nr):
    h = H(b"plait-pair-code" + certI + certR + ni + nr)
    v = int.from_bytes(h[:8], "big") % 1000000
    s = f"{v:06d}"; return s[:3] + " " + s[3:]

def main():
    role = sys.argv[1]; ident = Ident(sys.argv[2]); port = int(sys.argv[3])
    if role == "init":
        script = sys.argv[4].split(",")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.load_cert_chain(os.path.join(ident.home, "cert.pem"), os.path.join(ident.home, "key.pem"))
        ctx.set_alpn_protocols(["plait-pair/1"])
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30))
        peer = s.getpeercert(binary_form=True)
        certI, certR = ident.cert_der, peer
    else:
        victim = Ident(sys.argv[4]); script = sys.argv[5].split(",")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.verify_mode = ssl.CERT_NONE
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.load_cert_chain(os.path.join(ident.home, "cert.pem"), os.path.join(ident.home, "key.pem"))
        ctx.set_alpn_protocols(["plait-pair/1"])
        ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", port)); ls.listen(4); ls.settimeout(60)
        raw, _ = ls.accept(); raw.settimeout(30)
        s = ctx.wrap_socket(raw, server_side=True)
        certI, certR = victim.cert_der, ident.cert_der
    print("ALPN:", s.selected_alpn_protocol())
    mine = os.urandom(32); theirs = None; buf = b""
    def rd():
        nonlocal buf, theirs
        while len(buf) < 5:
            d = s.recv(4096)
            if not d: raise EOFError("closed")
            buf += d
        ln = struct.unpack(">I", buf[:4])[0]
        while len(buf) < 4 + ln:
            d = s.recv(4096)
            if not d: raise EOFError("closed mid-frame")
            buf += d
        t = buf[4]; p = buf[5:4 + ln]; buf = buf[4 + ln:]
        f = decode(p)
        print("  <-", t, {k: (v.hex()[:16] if isinstance(v, bytes) else v) for k, v in f})
        if t in (NONCE, REVEAL): theirs = get(f, 1)
        return t, f
    try:
        for step in script:
            if step == "commit":
                s.sendall(frame(COMMIT, fb(1, H(b"plait-pair-commit" + certR + certI + mine))))
            elif step == "badcommit": s.sendall(frame(COMMIT, fb(1, os.urandom(32))))
            elif step == "nonce": s.sendall(frame(NONCE, fb(1, mine)))
            elif step == "shortnonce": s.sendall(frame(NONCE, fb(1, mine[:31])))
            elif step == "longnonce": s.sendall(frame(NONCE, fb(1, mine + b"x")))
            elif step == "zeronce": s.sendall(frame(NONCE, b""))
            elif step == "reveal": s.sendall(frame(REVEAL, fb(1, mine)))
            elif step == "badreveal": s.sendall(frame(REVEAL, fb(1, os.urandom(32))))
            elif step == "yes": s.sendall(frame(CONFIRM, fv(1, 1)))
            elif step == "no": s.sendall(frame(CONFIRM, b""))
            elif step.startswith("raw:"):
                _, t, hx = step.split(":"); s.sendall(frame(int(t), bytes.fromhex(hx)))
            elif step.startswith("wait:"): time.sleep(float(step[5:]))
            elif step == "read": rd()
            elif step == "code":
                if role == "init": print("  code:", code(certI, certR, mine, theirs))
                else: print("  code:", code(certI, certR, theirs, mine))
            elif step == "close": s.close(); break
            elif step == "rst":
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)); s.close(); break
        else:
            time.sleep(0.5)
    except Exception as e:
        print("  hostile side: ended:", type(e).__name__, e)
main()
