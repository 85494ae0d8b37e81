"""E6: a paired hostile H claims, in a Notify, to hold the victim V's OWN timeline 1000 beyond V's head.
usage: e6_claim.py MODE     (homes /tmp/hostile5/e6; V's agent on 17950, H's server on 17951)
  agent      in an agent session with V's agent (H dials; Hello with V's summary as is, Want/Done, then the Notify)
  agentok    control: same, the Notify names V's summary exactly (no claim expected)
  oneshot    V runs `plait sync --peer` to H; H's closing Notify report (on V's Close) claims V's timeline +1000
  oneshotok  control: the closing report names V's summary exactly, with V's digest
Prints what V's sync said (one-shot), V's peers row, doctor's lines about H, V's log lines about H."""
import json, os, subprocess, sys, time
# hp.py / hserve.py: the fourth tester's raw-protocol helpers; PLAIT (environment) names the binary.
os.environ.setdefault("PLAIT", "/tmp/hostile5/bin/plait-e")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-11-25-d"))
from hserve import *
P = PLAIT; W = "/tmp/hostile5/e6"; VPORT, HPORT = 17950, 17951; MODE = sys.argv[1]
subprocess.run(["bash", "-c", f". {os.path.dirname(os.path.abspath(__file__))}/common.sh; setup {W} {VPORT} V H; "
                f"$P list add L --home {W}/V >/dev/null; for i in 1 2 3; do $P add L item$i --home {W}/V >/dev/null; done"], check=True)
V = f"{W}/V"; ident = Ident(f"{W}/H")
# H's address on V: the hostile server's port
subprocess.run([P, "pair", "--trust", ident.id, "--address", f"127.0.0.1:{HPORT}", "--home", V, "--config", f"{V}/config.toml"], capture_output=True)
out = []
if MODE.startswith("agent"):
    ag = subprocess.Popen([P, "agent", "--home", V, "--config", f"{V}/config.toml", "--no-discovery", "--listen", f"127.0.0.1:{VPORT}"],
                          stdout=open(f"{W}/V.log", "wb"), stderr=subprocess.STDOUT)
    time.sleep(1.5)
    c = Conn(ident, VPORT, verbose=True); c.hello(one_shot=False)
    vs = dict(c.peer_summary); print("V summary:", {tl_text(k): v for k, v in vs.items()})
    c.send(WANT, summary_wire(1, vs))
    c.s.settimeout(2)
    try:
        while True:
            t, f = c.recv()
            if t == WANT: c.send(DONE, summary_wire(1, {}))
            if t == DONE: break
    except Exception as e: print("H:", e)
    claim = dict(vs) if MODE == "agentok" else {k: v + 1000 for k, v in vs.items()}
    c.send(NOTIFY, notify_payload(claim, report=False))
    time.sleep(3)
    try: c.send(CLOSE, fs(1, "bye")); c.s.close()
    except Exception: pass
    time.sleep(1)
    print("--- V peers (agent running):"); print(subprocess.run([P, "peers", "--home", V], capture_output=True, text=True).stdout)
    ag.terminate(); ag.wait(timeout=20); print("V agent rc", ag.returncode)
else:
    ctx, ls = listen(ident, HPORT)
    th, res = start_sync(V, HPORT)
    c = accept(ctx, ls, ident)
    t, f = c.recv(); vs = parse_summary(getall(f, 6)); vdig = get(f, 10)
    c.send(HELLO, hello_payload(ident, {}))
    c.send(WANT, summary_wire(1, {}))
    try:
        while True:
            t, f = c.recv()
            if t == WANT: c.send(DONE, b"")
            elif t == CLOSE:
                if MODE == "oneshotok": c.send(NOTIFY, notify_payload(vs, True, vdig))
                else: c.send(NOTIFY, notify_payload({k: v + 1000 for k, v in vs.items()}, True))
                c.send(CLOSE, fs(1, "closing")); time.sleep(0.5); break
    except Exception as e: print("H: connection ended:", e)
    th.join(); print(f"--- plait sync rc={res['rc']}\n{res['out']}")
print("--- V peers:"); print(subprocess.run([P, "peers", "--home", V], capture_output=True, text=True).stdout)
for p in json.loads(subprocess.run([P, "peers", "--json", "--home", V], capture_output=True, text=True).stdout)["peers"]:
    if p["device"] == ident.id: print("--- peers --json row for H:", json.dumps(p)[:900])
d = subprocess.run([P, "doctor", "--home", V, "--config", f"{V}/config.toml"], capture_output=True, text=True)
print(f"--- V doctor rc={d.returncode} (lines not ok):"); print("\n".join(l for l in d.stdout.splitlines() if not l.strip().startswith("ok"))[:1500])
if os.path.exists(f"{W}/V.log"): print("--- V log:"); print("\n".join(l[:300] for l in open(f"{W}/V.log", errors="replace").read().splitlines()))
