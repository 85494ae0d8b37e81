"""Area 2: the closing report (PROTOCOL.md §13.5). The hostile home H listens on HPORT as an 'agent'; the victim
home V runs `plait sync --peer 127.0.0.1:HPORT`. Usage: t2_report.py VHOME HHOME HPORT CASE
Cases (what H does after V's Notify+Close, or elsewhere):
  honest      report = exactly what V sent (its whole summary)          -> expect "in sync", rc 0
  less        report lacks V's own timeline beyond seq 1                -> expect "did not store", rc 1
  none        Close with no report (no Notify)                          -> compat: own summary as ack
  noreport    Notify with summary only (no state digest) then Close
  more        report holds V's timeline far beyond V's head + invented timelines
  huge        report with seq 2^63-1 / 2^63-2 for V's timeline
  invent      report holding only invented timelines (none of V's)
  two_lessfirst  report(less) then report(full) then Close
  two_fullfirst  report(full) then report(less) then Close
  early_full  report(full) BEFORE its own Done (then Done, then on V's Close: Close only)
  early_less  report(less) before Done, then on Close: Close only
  reportnoclose  report(full), then never Close (keep the socket open 40 s)
  empty       report with an empty summary
  digest_bad  report(full) with a random digest (equal summaries -> divergence expected)
"""
import sys, os, subprocess, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hserve import *

V, HH, HPORT, CASE = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ident = Ident(HH)
ctx, ls = listen(ident, HPORT)
th, res = start_sync(V, HPORT)
c = accept(ctx, ls, ident)
# V's Hello
t, f = c.recv(); assert t == HELLO, t
vs = parse_summary(getall(f, 6)); vdig = get(f, 10)
print("V summary:", {tl_text(k): v for k, v in vs.items()})
c.send(HELLO, hello_payload(ident, {k: v + 1000 for k, v in vs.items()} if os.environ.get("HELLO_MORE") else {}))
c.send(WANT, summary_wire(1, {}))
full = dict(vs)
own = [k for k, v in vs.items()]
less = {k: (1 if v > 1 else 0) for k, v in vs.items()}
less = {k: v for k, v in less.items() if v}
BIG = (1 << 63) - 1
def report(summary, rep=True, digest=None):
    c.send(NOTIFY, notify_payload(summary, rep, digest))
sent_done = False
try:
    while True:
        t, f = c.recv()
        if t == WANT:
            if CASE == "early_full": report(full)
            if CASE == "early_less": report(less)
            c.send(DONE, b""); sent_done = True
        elif t == NOTIFY:
            pass
        elif t == CLOSE:
            if CASE == "honest": report(full, digest=vdig)
            elif CASE == "less": report(less)
            elif CASE == "none": pass
            elif CASE == "noreport": report(full, rep=False)
            elif CASE == "more":
                m = {k: v + 1000 for k, v in vs.items()}; m[12345] = 7; m[BIG] = 3
                report(m)
            elif CASE == "moreown": report({k: v + 1000 for k, v in vs.items()})
            elif CASE == "extra": report(dict(full) | {0x0123456789ABCDEF: 40})
            elif CASE == "huge": report({k: BIG for k in vs})
            elif CASE == "huge2": report({k: BIG - 1 for k in vs})
            elif CASE == "invent": report({1: 5, 2: 9})
            elif CASE == "two_lessfirst": report(less); report(full, digest=vdig)
            elif CASE == "two_fullfirst": report(full, digest=vdig); report(less)
            elif CASE == "reportnoclose":
                report(full, digest=vdig); time.sleep(40); break
            elif CASE == "empty": report({})
            elif CASE == "ovf": report({k: (1 << 64) - 1 for k in vs})
            elif CASE == "dup51":
                k = own[0]; c.send(NOTIFY, fb(1, ff64(1, k) + fv(2, vs[k])) + fb(1, ff64(1, k) + fv(2, 1)) + fb(2, os.urandom(32)))
            elif CASE == "dup15":
                k = own[0]; c.send(NOTIFY, fb(1, ff64(1, k) + fv(2, 1)) + fb(1, ff64(1, k) + fv(2, vs[k])) + fb(2, os.urandom(32)))
            elif CASE == "zero": report({k: 0 for k in vs})
            elif CASE == "reportonly":  # report, then just close the TCP connection (no Close)
                report(less); time.sleep(0.3); c.s.close(); break
            elif CASE == "digest_bad": report(full)
            c.send(CLOSE, fs(1, "closing"))
            time.sleep(0.5)
            break
except Exception as e:
    print("H: connection ended:", e)
th.join()
print(f"--- plait sync rc={res['rc']}\n{res['out']}")
r = subprocess.run([PLAIT, "peers", "--json", "--home", V], capture_output=True, text=True)
import json
for p in json.loads(r.stdout)["peers"]:
    if p["device"] == ident.id: print("--- peers row for H:", json.dumps(p))
