"""Hostile paired peer for plait protocol 2 (PROTOCOL.md), written from the spec.
Uses the hostile home's key.pem/cert.pem. Only 127.0.0.1."""
import hashlib, os, socket, ssl, struct, time, subprocess, sys
from cryptography.hazmat.primitives import serialization, hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography import x509

N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
PLAIT = os.environ.get("PLAIT", "/tmp/hostile/plait")

def H(b): return hashlib.sha256(b).digest()

# ---------- protobuf ----------
def varint(v):
    out = bytearray()
    if v < 0: v += 1 << 64
    while True:
        b = v & 0x7F; v >>= 7
        if v: out.append(b | 0x80)
        else: out.append(b); return bytes(out)
def tag(f, w): return varint(f << 3 | w)
def fv(f, v): return tag(f, 0) + varint(v)
def ff64(f, v): return tag(f, 1) + struct.pack("<Q", v)
def fb(f, b): return tag(f, 2) + varint(len(b)) + b
def fs(f, s): return fb(f, s.encode())
# proto3 (skip zero)
def pv(f, v): return fv(f, v) if v else b""
def pb(f, b): return fb(f, b) if b else b""

def decode(data):
    i, out = 0, []
    def rv():
        nonlocal i
        v, s = 0, 0
        while True:
            b = data[i]; i += 1
            v |= (b & 0x7F) << s
            if b < 0x80: return v
            s += 7
    while i < len(data):
        k = rv(); n, w = k >> 3, k & 7
        if w == 0: out.append((n, rv()))
        elif w == 1: out.append((n, int.from_bytes(data[i:i+8], "little"))); i += 8
        elif w == 2:
            l = rv(); out.append((n, data[i:i+l])); i += l
        elif w == 5: out.append((n, int.from_bytes(data[i:i+4], "little"))); i += 4
        else: raise ValueError("wire")
    return out
def read_frame(s, buf=b""):
    """One frame from socket-like `s` (recv), after the bytes `buf` already read: (type, decoded fields, the rest)."""
    while len(buf) < 5 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
        d = s.recv(4096)
        if not d: raise EOFError("closed")
        buf += d
    ln = struct.unpack(">I", buf[:4])[0]
    return buf[4], decode(buf[5:4 + ln]), buf[4 + ln:]

def get(fields, n, default=None):
    v = [x for k, x in fields if k == n]
    return v[-1] if v else default
def getall(fields, n): return [x for k, x in fields if k == n]

# ---------- identifiers ----------
ALPHA = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
def tl_text(v): return "".join(ALPHA[(v >> (5 * (12 - i))) & 31] for i in range(13))
def tl_parse(t):
    v = 0
    for ch in t: v = v * 32 + ALPHA.index(ch)
    return v
def summary_wire(field, entries):  # entries: dict timeline->seq
    return b"".join(fb(field, ff64(1, t) + fv(2, s)) for t, s in sorted(entries.items()))
def parse_summary(list_of_bytes):
    d = {}
    for e in list_of_bytes:
        f = decode(e); d[get(f, 1, 0)] = get(f, 2, 0)
    return d
def b32(data):
    A = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
    bits = "".join(f"{b:08b}" for b in data); bits += "0" * (-len(bits) % 5)
    return "".join(A[int(bits[i:i+5], 2)] for i in range(0, len(bits), 5))
def luhn(chunk):
    A = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
    factor, s = 1, 0
    for ch in chunk:
        a = factor * A.index(ch); factor = 1 if factor == 2 else 2
        s += a // 32 + a % 32
    return A[(32 - s % 32) % 32]
def device_id(cert_der):
    t = b32(H(cert_der))
    chunks = [t[i:i+13] for i in range(0, 52, 13)]
    full = "".join(c + luhn(c) for c in chunks)
    return "-".join(full[i:i+7] for i in range(0, 56, 7))

# ---------- identity ----------
class Ident:
    def __init__(self, home):
        self.home = home
        pem = open(os.path.join(home, "cert.pem"), "rb").read()
        self.cert = x509.load_pem_x509_certificate(pem)
        self.cert_der = self.cert.public_bytes(serialization.Encoding.DER)
        self.key = serialization.load_pem_private_key(open(os.path.join(home, "key.pem"), "rb").read(), None)
        self.id = device_id(self.cert_der)
    def sign_hash(self, chash):
        der = self.key.sign(b"plait-change-v1\x00" + chash, ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        if s > N // 2: s = N - s
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")
    def sign_raw(self, msg):
        der = self.key.sign(msg, ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        if s > N // 2: s = N - s
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")

# ---------- changes ----------
def change_bytes(timeline, seq, lamport, prev, kind, payload, version=1, wall=0, witness=None):
    b = (ff64(1, timeline) + fv(2, seq) + fv(3, lamport) + fb(4, prev) + fs(5, kind) + fv(6, version)
         + fv(7, wall) + fb(8, payload))
    if witness:
        b += fb(9, ff64(1, witness[0]) + fv(2, witness[1]))
    return b
def pos(at):
    if at == "top": return fv(1, 1)
    if at == "bottom" or at is None: return fv(2, 1)
    return fb(3, at)
def p_list_create(lid, title, at="bottom"): return fb(1, lid) + fs(2, title) + fb(4, pos(at))
def p_item_create(iid, lid, text, at="bottom"): return fb(1, iid) + fb(2, lid) + fs(3, text) + fb(4, pos(at))
def p_item_edit(iid, text): return fb(1, iid) + fs(2, text)
def p_ref(iid): return fb(1, iid)
def p_item_move(iid, lid=None, at="bottom"): return fb(1, iid) + (fb(2, lid) if lid else b"") + fb(3, pos(at))
def p_list_move(lid, at): return fb(1, lid) + fb(2, pos(at))
def p_list_delete_v1(lid, observed): return fb(1, lid) + b"".join(fb(2, ff64(1, t) + fv(2, s)) for t, s in sorted(observed.items()))
def p_list_delete_v2(lid, observed):  # observed: {t: (seq, hash)}
    return fb(1, lid) + b"".join(fb(2, ff64(1, t) + fv(2, s) + fb(3, hh)) for t, (s, hh) in sorted(observed.items()))

class Timeline:
    """A signed timeline authored by the hostile key."""
    def __init__(self, ident, nonce=None, supersedes=None, lamport0=0):
        self.ident = ident
        self.nonce = nonce or os.urandom(16)
        payload = fb(1, ident.cert_der) + fb(2, self.nonce)
        if supersedes: payload += fb(3, ff64(1, supersedes[0]) + fv(2, supersedes[1]) + fb(3, supersedes[2]))
        self.id = int.from_bytes(H(b"plait-timeline" + ident.cert_der + self.nonce)[:8], "big")
        self.changes = []  # (bytes, hash)
        self.lamport = lamport0
        self.add("timeline.begin", payload)
    @property
    def head(self): return (len(self.changes), self.changes[-1][1])
    def add(self, kind, payload, lamport=None, witness=None, version=1):
        seq = len(self.changes) + 1
        prev = self.changes[-1][1] if self.changes else bytes(32)
        lam = lamport if lamport is not None else self.lamport + 1
        b = change_bytes(self.id, seq, lam, prev, kind, payload, version=version, wall=int(time.time()*1000), witness=witness)
        self.lamport = lam
        self.changes.append((b, H(b)))
        return seq, H(b)
    def batch(self, frm=1, to=None):
        """Changes frame payload for seq frm..to, signing the last one."""
        to = to or len(self.changes)
        sel = self.changes[frm-1:to]
        out = b"".join(fb(1, c) for c, _ in sel)
        out += fb(2, fv(1, len(sel) - 1) + fb(2, self.ident.sign_hash(sel[-1][1])))
        return out

def changes_payload(parts):
    """parts: list of (bytes, signature-or-None)."""
    out = b"".join(fb(1, c) for c, _ in parts)
    for i, (c, sig) in enumerate(parts):
        if sig: out += fb(2, fv(1, i) + fb(2, sig))
    return out

# ---------- session ----------
HELLO, WANT, CHUNK, CHANGES, DONE, NOTIFY, PING, PONG, CLOSE = range(1, 10)
NAMES = {1:"Hello",2:"Want",3:"BaselineChunk",4:"Changes",5:"Done",6:"Notify",7:"Ping",8:"Pong",9:"Close"}

class Conn:
    def __init__(self, ident, port, host="127.0.0.1", verbose=True):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_3
        ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
        ctx.load_cert_chain(os.path.join(ident.home, "cert.pem"), os.path.join(ident.home, "key.pem"))
        ctx.set_alpn_protocols(["plait-sync/2"])
        raw = socket.create_connection((host, port), timeout=30)
        self.s = ctx.wrap_socket(raw)
        self.ident = ident; self.verbose = verbose
        self.buf = b""
    def send(self, t, payload):
        self.s.sendall(struct.pack(">IB", len(payload) + 1, t) + payload)
    def recv(self):
        while len(self.buf) < 5:
            d = self.s.recv(65536)
            if not d: raise EOFError("closed")
            self.buf += d
        ln = struct.unpack(">I", self.buf[:4])[0]
        while len(self.buf) < 4 + ln:
            d = self.s.recv(1 << 20)
            if not d: raise EOFError("closed mid-frame")
            self.buf += d
        t = self.buf[4]; p = self.buf[5:4+ln]; self.buf = self.buf[4+ln:]
        f = decode(p)
        if self.verbose:
            if t == CLOSE: print("  <- Close:", get(f, 1, b"").decode(errors="replace"))
            elif t == CHANGES: print(f"  <- Changes ({len(getall(f,1))} changes)")
            elif t == DONE: print("  <- Done", {tl_text(k): v for k, v in parse_summary(getall(f,1)).items()})
            elif t == WANT: print("  <- Want", {tl_text(k): v for k, v in parse_summary(getall(f,1)).items()})
            else: print("  <-", NAMES.get(t, t))
        if t == PING: self.send(PONG, pv(1, get(f, 1, 0)))
        return t, f
    def hello(self, summary=None, heads=None, fork_records=(), one_shot=True, baseline_summary=None,
              baseline_digest=b"", state_digest=None, succession=None, nonce=None):
        summary = summary or {}
        p = (pv(1, 2) + pb(2, b"lists") + pv(3, 2) + pb(4, self.ident.id.encode()) + pb(5, b"hostile")
             + summary_wire(6, summary))
        for t, (s, hh) in sorted((heads or {}).items()): p += fb(7, ff64(1, t) + fv(2, s) + fb(3, hh))
        p += summary_wire(8, baseline_summary or {})
        p += pb(9, baseline_digest) + fb(10, state_digest or os.urandom(32)) + pv(12, 16 << 20)
        for r in fork_records: p += fb(13, r)
        p += fb(14, nonce or os.urandom(16))
        if succession: p += fb(15, fb(1, succession[0]) + fb(2, succession[1]))
        if one_shot: p += fv(16, 1)
        self.send(HELLO, p)
        t, f = self.recv()
        if t != HELLO:
            raise RuntimeError(f"expected Hello, got {NAMES.get(t,t)}: {f}")
        self.peer_summary = parse_summary(getall(f, 6))
        self.peer_heads = {}
        for e in getall(f, 7):
            ef = decode(e); self.peer_heads[get(ef, 1, 0)] = (get(ef, 2, 0), get(ef, 3))
        self.peer_fork_records = getall(f, 13)
        self.peer_hello = f
        return f

def fork_record(root, parent, base, first_hash, rival_hash):
    branch = int.from_bytes(H(b"plait-fork" + parent.to_bytes(8, "big") + first_hash)[:8], "big")
    return branch, ff64(1, branch) + ff64(2, root) + ff64(3, parent) + fv(4, base) + fb(5, first_hash) + fb(6, rival_hash)

def serve_session(c, give, done_summary, want_have=None, after_hello=None, give_baseline=None, wait_close=True):
    """Generic one-shot session as dialler: on the peer's Want, send `give` (list of Changes payloads) then Done.
    Ask with Want(want_have or peer summary so nothing comes)."""
    c.send(WANT, summary_wire(1, want_have if want_have is not None else c.peer_summary))
    my_done = their_done = False
    log = []
    try:
        while True:
            t, f = c.recv()
            log.append((t, f))
            if t == WANT:
                if give_baseline:
                    for ch in give_baseline: c.send(CHUNK, ch)
                for g in give: c.send(CHANGES, g)
                c.send(DONE, summary_wire(1, done_summary))
                my_done = True
            elif t == DONE:
                their_done = True
            elif t == CLOSE:
                break
            if my_done and their_done:
                c.send(NOTIFY, summary_wire(1, done_summary))
                c.send(CLOSE, fs(1, "done"))
                my_done = False
                if not wait_close: break
    except (EOFError, ssl.SSLError, ConnectionError, socket.timeout) as e:
        print("  connection ended:", e)
    return log

def run(*args, check=False):
    r = subprocess.run([PLAIT, *args], capture_output=True, text=True, timeout=120)
    out = (r.stdout + r.stderr).strip()
    return r.returncode, out

def sh(*args):
    rc, out = run(*args)
    print(f"$ plait {' '.join(args)}  [rc={rc}]\n" + "\n".join("    " + l for l in out.splitlines()))
    return rc, out

def fetch_all(ident, port, have=None):
    """Pull every change the peer holds (Want with `have`); returns list of change bytes and the peer's Hello."""
    c = Conn(ident, port, verbose=False)
    c.hello()
    c.send(WANT, summary_wire(1, have or {}))
    got, sigs = [], []
    while True:
        t, f = c.recv()
        if t == CHANGES: got += getall(f, 1)
        elif t == WANT: c.send(DONE, b"")
        elif t == DONE: break
        elif t == CLOSE: break
    try:
        c.send(CLOSE, fs(1, "done"))
    except Exception: pass
    return got, c

def parse_change(b):
    f = decode(b)
    return dict(timeline=get(f,1), seq=get(f,2), lamport=get(f,3), prev=get(f,4), kind=get(f,5).decode(), payload=get(f,8), hash=H(b), bytes=b)

def baseline_bytes(timelines, max_lamport, snapshot=b"\x08\x01", records=()):
    """timelines: list of dict(timeline, seq, head_hash, head_lamport, ended=False, certificate=None, superseded_at=None)"""
    b = fv(1, 1)
    for t in sorted(timelines, key=lambda x: x["timeline"]):
        e = ff64(1, t["timeline"]) + fv(2, t["seq"]) + fb(3, t["head_hash"]) + fv(4, t["head_lamport"]) + fv(5, 1 if t.get("ended") else 0)
        if t.get("certificate"): e += fb(6, t["certificate"])
        if t.get("superseded_at"): e += fv(7, t["superseded_at"])
        b += fb(2, e)
    b += fv(3, max_lamport) + fb(4, snapshot)
    for r in records: b += fb(5, r)
    return b

def chunks_for(bl, bsum, size=60000):
    out = []
    for off in range(0, len(bl), size):
        data = bl[off:off+size]; last = off + len(data) == len(bl)
        out.append(pv(1, len(bl)) + pv(2, off) + pb(3, data) + pv(4, 1 if last else 0) + summary_wire(5, bsum))
    return out
