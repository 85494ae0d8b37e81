# Hostile H sends succession statements in Hello to victim A (area 2). usage: t2_succession.py A_PORT CASE...
# W env = homes dir (A C H D X + rsa.pem p384.pem expl.pem)
import sys; sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from hp import *
W = os.environ.get("W", "/tmp/hostile/t2/s")
h = Ident(W + "/H"); x = Ident(W + "/X"); cI = Ident(W + "/C"); aI = Ident(W + "/A")
def pemder(p): return x509.load_pem_x509_certificate(open(p, "rb").read()).public_bytes(serialization.Encoding.DER)
port = int(sys.argv[1])
CTX = b"plait-succession-v1\x00"
def stmt(old, new, at=1700000000000): return fb(1, old) + fb(2, new) + (fv(3, at) if at else b"")
def signed(st, signer=h): return (st, signer.sign_raw(CTX + st))
def highs(sig):
    r, s = int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big")
    return r.to_bytes(32, "big") + (N - s).to_bytes(32, "big")
cases = {
 "oldC":      lambda: signed(stmt(cI.cert_der, x.cert_der)),                 # claims to retire C's cert, signed by H
 "oldC_Csig": lambda: signed(stmt(cI.cert_der, x.cert_der), cI),             # C's real key but over H's TLS (would need C's key; sanity)
 "wrongkey":  lambda: signed(stmt(h.cert_der, x.cert_der), x),               # signed by X's key
 "newA":      lambda: signed(stmt(h.cert_der, aI.cert_der)),                 # names receiver
 "newH":      lambda: signed(stmt(h.cert_der, h.cert_der)),                  # new == old
 "trail":     lambda: signed(stmt(h.cert_der, x.cert_der + b"\x00")),
 "trunc":     lambda: signed(stmt(h.cert_der, x.cert_der[:-10])),
 "rsa":       lambda: signed(stmt(h.cert_der, pemder(W + "/rsa.pem"))),
 "p384":      lambda: signed(stmt(h.cert_der, pemder(W + "/p384.pem"))),
 "explicit":  lambda: signed(stmt(h.cert_der, pemder(W + "/expl.pem"))),
 "sig63":     lambda: (stmt(h.cert_der, x.cert_der), h.sign_raw(CTX + stmt(h.cert_der, x.cert_der))[:63]),
 "sig65":     lambda: (stmt(h.cert_der, x.cert_der), h.sign_raw(CTX + stmt(h.cert_der, x.cert_der)) + b"\x00"),
 "emptystmt": lambda: (b"", bytes(64)),
 "big":       lambda: signed(stmt(h.cert_der, x.cert_der) + fb(9, b"A" * 16400)),
 "noncanon":  lambda: signed(fb(2, x.cert_der) + fb(1, h.cert_der)),
 "unknownfld":lambda: signed(stmt(h.cert_der, x.cert_der) + fv(4, 1)),
 "at0":       lambda: signed(stmt(h.cert_der, x.cert_der, at=0) + fv(3, 0)),   # issued_at 0 written (non-canonical)
 "highS":     lambda: (lambda st: (st, highs(h.sign_raw(CTX + st))))(stmt(h.cert_der, x.cert_der)),
 "r0":        lambda: (stmt(h.cert_der, x.cert_der), bytes(32) + (1).to_bytes(32, "big")),
 "nocontext": lambda: (lambda st: (st, h.sign_raw(st)))(stmt(h.cert_der, x.cert_der)),
 "notcert":   lambda: signed(stmt(h.cert_der, b"\x30\x03\x02\x01\x01")),
 "emptynew":  lambda: signed(fb(1, h.cert_der)),
 "newC":      lambda: signed(stmt(h.cert_der, cI.cert_der)),                 # H claims its successor is honest C
 "newX":      lambda: signed(stmt(h.cert_der, x.cert_der)),                  # valid: H -> X (by design trusted)
}
for name in sys.argv[2:]:
    print(f"== case {name}")
    if name.startswith("new:"):   # H claims its successor is the certificate of home W/<name>
        st, sig = signed(stmt(h.cert_der, Ident(W + "/" + name[4:]).cert_der))
    else:
        st, sig = cases[name]()
    try:
        c = Conn(h, port)
        c.hello(succession=(st, sig), one_shot=True)
        c.send(WANT, summary_wire(1, c.peer_summary))
        for _ in range(6):
            t, f = c.recv()
            if t == WANT: c.send(DONE, b"")
            if t == CLOSE: break
            if t == DONE:
                c.send(NOTIFY, b""); c.send(CLOSE, fs(1, "done"))
    except Exception as e:
        print("  ended:", type(e).__name__, e)
