"""Area 2 (liveness): a paired hostile 'agent' H that keeps the connection alive (answers every Ping) but never
moves the one-shot session on. usage: t2_stall.py VHOME HHOME HPORT CASE [CAP_SECONDS]
  nowant   Hello, then nothing (never its Want)
  nodone   Hello + Want, answers V's Want with one Changes... never Done  (here: nothing at all after V's Want)
  noclose  a full honest exchange, then on V's Close: nothing (no report, no Close), connection kept open
Prints how long `plait sync --timeout 20` ran (killed at CAP_SECONDS, default 150)."""
import sys, os, subprocess, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hserve import *

V, HH, HPORT, CASE = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
CAP = float(sys.argv[5]) if len(sys.argv) > 5 else 150
ident = Ident(HH)
ctx, ls = listen(ident, HPORT)
res = {}
def runsync():
    t0 = time.time()
    p = subprocess.Popen([PLAIT, "sync", "--home", V, "--peer", f"127.0.0.1:{HPORT}", "--timeout", "20"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=CAP); res["rc"] = p.returncode
    except subprocess.TimeoutExpired:
        p.kill(); out, _ = p.communicate(); res["rc"] = f"still running after {CAP}s: killed"
    res["out"] = out.strip(); res["secs"] = round(time.time() - t0, 1)
th = threading.Thread(target=runsync); th.start()
c = accept(ctx, ls, ident); c.verbose = False
t, f = c.recv(); vs = parse_summary(getall(f, 6))
c.send(HELLO, hello_payload(ident, {}))
if CASE != "nowant": c.send(WANT, summary_wire(1, {}))
c.s.settimeout(CAP + 10)
pings = 0
try:
    while th.is_alive():
        t, f = c.recv()
        if t == PING: pings += 1
        if CASE == "noclose" and t == WANT: c.send(DONE, b"")
except Exception as e:
    pass
th.join()
print(f"case {CASE}: plait sync rc={res['rc']} after {res['secs']} s, {pings} pings answered\n{res['out']}")
