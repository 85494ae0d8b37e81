"""Area 3: the paired hostile H dials the victim's agent, answers its Want with MB megabytes of BaselineChunks of a
baseline it never finishes, and hangs up; then the victim's user unpairs H. Is the staging (per peer) ever dropped?
usage: t3_stage_unpair.py VHOME HHOME PORT MB"""
import sys, os, subprocess, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hp import *

V, HH, PORT, MB = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ident = Ident(HH)
T = 0x0123456789ABCDEF
total = 200 << 20
c = Conn(ident, PORT, verbose=False)
c.hello(summary={T: 5}, baseline_summary={T: 5}, baseline_digest=os.urandom(32), one_shot=False)
c.send(WANT, summary_wire(1, c.peer_summary))
chunk = os.urandom(1 << 20)
while True:
    t, f = c.recv()
    if t == WANT:
        for i in range(MB):
            c.send(CHUNK, pv(1, total) + pv(2, i << 20) + pb(3, chunk) + summary_wire(5, {T: 5}))
        time.sleep(2)
        break
c.s.close()
def size(): return sum(os.path.getsize(os.path.join(V, f)) for f in os.listdir(V) if f.startswith("plait.db"))
print(f"victim store after staging {MB} MiB: {size() >> 20} MiB")
print(subprocess.run([PLAIT, "unpair", ident.id, "--home", V], capture_output=True, text=True).stdout.strip())
