"""Area 3: the hostile paired H dials the victim's AGENT (127.0.0.1:PORT) with a one-shot (or agent) Hello, sends a
first batch, then waits while the test runs `plait unpair H` on the victim (its agent running), then sends a second
batch and Done. Does the victim's agent keep taking changes from the device its user just unpaired?
usage: t3_unpair_agent_oneshot.py VHOME HHOME PORT [oneshot|agent]"""
import sys, os, subprocess, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hp import *

V, HH, PORT = sys.argv[1], sys.argv[2], int(sys.argv[3]); MODE = sys.argv[4] if len(sys.argv) > 4 else "oneshot"
ident = Ident(HH)
tl = Timeline(ident)
lid = os.urandom(16)
tl.add("list.create", p_list_create(lid, "From H " + MODE))
for i in range(20): tl.add("item.create", p_item_create(os.urandom(16), lid, f"h item {i}"))
c = Conn(ident, PORT)
c.hello(one_shot=(MODE == "oneshot"))
c.send(WANT, summary_wire(1, c.peer_summary))
try:
    while True:
        t, f = c.recv()
        if t == WANT:
            c.send(CHANGES, tl.batch(1, 10))
            time.sleep(1.0)
            r = subprocess.run([PLAIT, "unpair", ident.id, "--home", V], capture_output=True, text=True)
            print("unpair:", r.stdout.strip(), r.stderr.strip())
            time.sleep(1.0)
            c.send(CHANGES, tl.batch(11, len(tl.changes)))
            c.send(DONE, summary_wire(1, {tl.id: len(tl.changes)}))
            time.sleep(1.0)
            if MODE == "oneshot":
                c.send(NOTIFY, summary_wire(1, c.peer_summary | {tl.id: len(tl.changes)}))
                c.send(CLOSE, fs(1, "done"))
        elif t == CLOSE:
            break
except Exception as e:
    print("H: ended:", type(e).__name__, e)
time.sleep(0.5)
r = subprocess.run([PLAIT, "show", "From H " + MODE, "--home", V], capture_output=True, text=True)
print(f"--- items of 'From H {MODE}' stored on the victim: {r.stdout.count('h item')} of 20 (10 were sent after the unpair)")
