"""Area 3: the victim V runs `plait sync --peer 127.0.0.1:HPORT` against the paired hostile H (acting as agent).
H sends a first batch of its timeline, then waits while the test runs `plait unpair H` on V, then sends a second
batch and Done. Does V keep taking changes from a device its user just unpaired, and what does it say?
usage: t3_unpair_trickle.py VHOME HHOME HPORT [MODE]   MODE: unpair (default) | none (control: no unpair) | wantlate (H sends its Want {} only after the unpair)"""
import sys, os, subprocess, threading, time, json
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hserve import *

V, HH, HPORT = sys.argv[1], sys.argv[2], int(sys.argv[3]); MODE = sys.argv[4] if len(sys.argv) > 4 else "unpair"
ident = Ident(HH)
tl = Timeline(ident)
lid = os.urandom(16)
tl.add("list.create", p_list_create(lid, "From H"))
for i in range(20): tl.add("item.create", p_item_create(os.urandom(16), lid, f"h item {i}"))
ctx, ls = listen(ident, HPORT)
th, res = start_sync(V, HPORT)
c = accept(ctx, ls, ident)
t, f = c.recv(); vs = parse_summary(getall(f, 6))
c.send(HELLO, hello_payload(ident, {tl.id: len(tl.changes)}))
if MODE == "wantlate":   # H asks for everything only after the victim's user unpaired it
    time.sleep(1.0)
    r = subprocess.run([PLAIT, "unpair", ident.id, "--home", V], capture_output=True, text=True)
    print("unpair:", r.stdout.strip(), r.stderr.strip())
    time.sleep(0.5)
    c.send(WANT, summary_wire(1, {}))
    got = 0
else:
    c.send(WANT, summary_wire(1, vs))   # H wants nothing
try:
    while True:
        t, f = c.recv()
        if t == CHANGES and MODE == "wantlate":
            got += len(getall(f, 1)); print(f"H received {got} of the victim's changes after the unpair")
        if t == WANT and MODE == "wantlate":
            c.send(DONE, b"")
        elif t == WANT:
            c.send(CHANGES, tl.batch(1, 10))
            time.sleep(1.0)
            if MODE == "unpair":
                r = subprocess.run([PLAIT, "unpair", ident.id, "--home", V], capture_output=True, text=True)
                print("unpair:", r.stdout.strip(), r.stderr.strip())
            time.sleep(0.5)
            c.send(CHANGES, tl.batch(11, len(tl.changes)))
            c.send(DONE, summary_wire(1, {tl.id: len(tl.changes)}))
        elif t == CLOSE:
            c.send(NOTIFY, notify_payload(vs | {tl.id: len(tl.changes)}, report=False))
            c.send(CLOSE, fs(1, "closing")); time.sleep(0.3); break
except Exception as e:
    print("H: ended:", e)
th.join()
print(f"--- plait sync rc={res['rc']}\n{res['out']}")
for cmd in (["status"], ["peers"], ["peers", "--pending"]):
    r = subprocess.run([PLAIT, *cmd, "--home", V], capture_output=True, text=True); print(f"--- {cmd}:\n{r.stdout.strip()}")
r = subprocess.run([PLAIT, "show", "From H", "--home", V], capture_output=True, text=True)
print("--- items of 'From H' on V:", r.stdout.count("h item"))
