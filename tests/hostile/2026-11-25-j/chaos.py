#!/usr/bin/env python3
"""Seeded chaos run with compaction ON, for plait (hostile tester 2026-11-25-j).

usage: chaos.py SEED [--homes N] [--seconds S] [--slot K] [--no-restore] [--keep]

Homes under /tmp/hostile10/chaos/SEED, ports 18310+10*slot .. +N-1 (loopback only). Every home has
[api] listen = "", [discovery] enabled = false, and a random [compaction] interval_seconds (0, 1, 2 or 4).
Schedule (seeded): CLI edits on random homes, `plait compact` (sometimes SIGKILLed), SIGKILLed `add`,
one-shot `plait sync`, agent SIGKILL+restart, an agent down for a while, backup and restore of a home.
Then heal (agents up, sync everywhere, follow any `plait rejoin`/`repair` advice) and check:
  convergence (show --json + digest), nothing lost, no crash, doctor.
Prints the seed and a verdict line "RESULT seed=… ok|FAIL …". Exit 0 = ok, 1 = some check failed.
"""
import json, os, random, re, shutil, signal, subprocess, sys, time

P = os.environ.get("PLAIT", "/tmp/hostile10/bin/plait-j")
args = sys.argv[1:]
SEED = int(args[0])
def opt(name, default):
    if name in args:
        return type(default)(args[args.index(name) + 1])
    return default
NH = opt("--homes", 0) or (3 + SEED % 2)
SECONDS = opt("--seconds", 150.0)
SLOT = opt("--slot", 0)
NORESTORE = "--no-restore" in args
CAREFUL = "--careful" in args   # a restored home syncs (agent up, `plait sync`) before any edit on it
PLAIT_RESTORE = "--plait-restore" in args   # backups by `plait backup` (agent left running), restores by `plait restore`
RESTORED = set()
KEEP = "--keep" in args
rnd = random.Random(SEED)
W = f"/tmp/hostile10/chaos/{SEED}"
BASE = 18310 + 10 * SLOT
NAMES = "abcd"[:NH]
T0 = time.time()
print(f"seed={SEED} homes={NH} seconds={SECONDS} dir={W} ports={BASE}..{BASE+NH-1}", flush=True)

def log(*a):
    print(f"[{time.time()-T0:7.2f}]", *a, flush=True)

def home(n): return f"{W}/{n}"
def port(n): return BASE + NAMES.index(n)

PROBLEMS = []   # (kind, text)
def problem(kind, text):
    PROBLEMS.append((kind, text))
    log(f"!!! {kind}: {text}")

MESSAGES = {}   # normalized failure message -> (count, example)
def norm(s):
    s = re.sub(r"[0-9a-f]{8,}", "H", s)
    s = re.sub(r"[A-Z0-9]{7}(-[A-Z0-9]{7}){7}", "DEVID", s)
    s = re.sub(r"\b[0-9A-Z]{13}\b", "TL", s)
    s = re.sub(r"\d+", "N", s)
    return s[:300]

CRASH_RE = re.compile(r"Fatal error|Illegal instruction|Segmentation fault|Trace/breakpoint|core dumped|Precondition failed|Assertion failed|Swift runtime failure")

def run(n, *cmd, timeout=60, kill_after=None, tag=None):
    """Run plait CMD on home n. Returns (rc, out, err, killed)."""
    argv = [P, *cmd, "--home", home(n), "--config", f"{home(n)}/config.toml"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = False
    try:
        if kill_after is not None:
            try:
                out, err = p.communicate(timeout=kill_after)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL); killed = True
                out, err = p.communicate()
        else:
            out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)
        out, err = p.communicate()
        problem("hang", f"{n}: {' '.join(cmd)} did not finish in {timeout}s; err={err[-300:]!r}")
        return (-9, out, err, True)
    rc = p.returncode
    if not killed and (rc < 0 or CRASH_RE.search(err or "") or CRASH_RE.search(out or "")):
        problem("crash", f"{n}: {' '.join(cmd)} rc={rc} err={err[-800:]!r}")
    if rc not in (0, None) and not killed:
        k = (cmd[0] if cmd[0] != "list" else "list " + cmd[1]) + ": " + norm((err or out).strip().splitlines()[-1] if (err or out).strip() else "")
        c, ex = MESSAGES.get(k, (0, ""))
        MESSAGES[k] = (c + 1, ex or (err or out).strip()[:600])
    return (rc, out, err, killed)

# ---------------------------------------------------------------- agents
AGENTS = {}      # name -> Popen
AGENT_WANTED = {n: True for n in NAMES}
STARTED = {}
def start_agent(n):
    if n in AGENTS and AGENTS[n].poll() is None:
        return
    lf = open(f"{W}/{n}.log", "a")
    lf.write(f"==== start at {time.time()-T0:.2f}\n"); lf.flush()
    STARTED[n] = time.time()
    AGENTS[n] = subprocess.Popen([P, "agent", "--home", home(n), "--config", f"{home(n)}/config.toml",
                                  "--no-discovery", "--listen", f"127.0.0.1:{port(n)}"],
                                 stdout=lf, stderr=subprocess.STDOUT)
    lf.close()

def stop_agent(n, sig=signal.SIGTERM):
    p = AGENTS.get(n)
    if not p: return None
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            problem("agent-stop-hang", f"{n}: agent {p.pid} did not stop within 30s of {sig}")
            p.kill(); p.wait()
        rc = p.returncode
        if sig == signal.SIGTERM and rc == -15 and time.time() - STARTED.get(n, 0) < 1.5:
            log(f"note: {n}: agent SIGTERMed {time.time() - STARTED.get(n, 0):.2f}s after its start died of the signal")
        elif sig == signal.SIGTERM and rc != 0:
            problem("agent-exit", f"{n}: agent stopped by SIGTERM exited rc={rc}; log tail: {tail(n)}")
    else:
        rc = p.returncode
    del AGENTS[n]
    return rc

def tail(n, k=6):
    try:
        with open(f"{W}/{n}.log") as f:
            return " | ".join(l.strip()[:300] for l in f.readlines()[-k:])
    except Exception as e:
        return str(e)

def check_agents_alive():
    for n, p in list(AGENTS.items()):
        if p.poll() is not None:
            problem("agent-died", f"{n}: agent {p.pid} exited rc={p.returncode} unasked; log tail: {tail(n)}")
            del AGENTS[n]
            if AGENT_WANTED[n]:
                start_agent(n)

def cleanup(*_):
    for n in list(AGENTS):
        p = AGENTS[n]
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try: p.wait(timeout=20)
            except subprocess.TimeoutExpired: p.kill(); p.wait()
    AGENTS.clear()
signal.signal(signal.SIGTERM, lambda *a: (cleanup(), sys.exit(3)))

# ---------------------------------------------------------------- model
ITEMS = {}        # full id -> dict(text, home, t, lists=set())
REMOVED = set()   # ids removed by a successful rm
RM_SINCE_BACKUP = {}  # name -> ids removed on it since its backup
RM_ATRISK = set()     # rm's undone by a restore (made after the backup, not yet on another home)
EDITS = []            # successful edits: home, t, item, text, risk
DONES = []            # successful done/reopen: home, t, item, kind, risk
BACKUP_T = {}
UNSYNCED = {}         # restored home -> True until it synced (a sync exited 0, or its agent ran 3 s)
def unsynced_restore(n):
    if not UNSYNCED.get(n): return False
    if n in AGENTS and time.time() - STARTED.get(n, 0) > 3: UNSYNCED[n] = False
    return UNSYNCED.get(n, False)
SOFT = {}         # id -> reason (a list rm may have taken it, etc.)
ATRISK = {}       # id -> reason (documented loss: added after a backup, not synced before the restore)
LISTS = {}        # list id -> title
LISTRM = set()
BACKUP = {}       # name -> (backup dir, op index, set of ids added on it since)
SINCE_BACKUP = {} # name -> set of item ids added (or killed-add found) on that home since its backup
ADVICE = []       # (home, advice, what we did, result)
counter = [0]

def show(n):
    rc, out, err, _ = run(n, "show", "--json")
    if rc != 0:
        return None
    try:
        return json.loads(out)
    except Exception:
        problem("bad-json", f"{n}: show --json not JSON: {out[:200]!r}")
        return None

def flat(st):
    """id -> (list id, text, done)"""
    r = {}
    if not st: return r
    for l in st.get("lists", []):
        for sec in ("pending", "completed"):
            for it in l.get(sec) or []:
                r[it["id"]] = (l["id"], it["text"], sec == "completed")
    return r

def follow_advice(n, text, what):
    t = text or ""
    if "plait rejoin" in t and "--new-key" not in t:
        rc, out, err, _ = run(n, "rejoin")
        ADVICE.append((n, what, "rejoin", rc, (out + err).strip()[:300]))
        log(f"{n}: followed advice `plait rejoin` after {what}: rc={rc} {(out+err).strip()[:200]}")
        return True
    if "plait repair" in t:
        rc, out, err, _ = run(n, "repair")
        ADVICE.append((n, what, "repair", rc, (out + err).strip()[:300]))
        log(f"{n}: followed advice `plait repair` after {what}: rc={rc} {(out+err).strip()[:200]}")
        return True
    return False

def mark_added(n, iid, text, lst):
    ITEMS[iid] = dict(text=text, home=n, t=time.time() - T0, lists={lst})
    if n in SINCE_BACKUP:
        SINCE_BACKUP[n].add(iid)

def pick_list(st):
    ls = [l["id"] for l in (st or {}).get("lists", [])]
    return rnd.choice(ls) if ls else None

def pick_item(st, sec=None):
    f = flat(st)
    c = [i for i, v in f.items() if sec is None or v[2] == (sec == "completed")]
    return rnd.choice(c) if c else None

def op_data(n):
    st = show(n)
    kind = rnd.choices(["add", "edit", "done", "reopen", "move", "rm", "ladd", "lren", "lrm", "lmove", "batch"],
                       [30, 7, 8, 5, 8, 5, 4, 3, 0.8, 2, 2])[0]
    counter[0] += 1
    k = counter[0]
    if kind == "ladd" or (not (st or {}).get("lists") and kind != "batch"):
        title = f"L{k}"
        rc, out, err, _ = run(n, "list", "add", title, "--json")
        if rc == 0:
            LISTS[json.loads(out)["id"]] = title
        else:
            follow_advice(n, err, "list add")
        return f"list add {title} rc={rc}"
    if kind == "add":
        l = pick_list(st); text = f"i{k}"
        extra = []
        r = rnd.random()
        if r < 0.15: extra = ["--top"]
        elif r < 0.3:
            it = pick_item(st, "pending")
            if it and flat(st)[it][0] == l: extra = ["--after", it[:8]]
        rc, out, err, _ = run(n, "add", l[:8], text, *extra, "--json")
        if rc == 0:
            mark_added(n, json.loads(out)["id"], text, l)
        else:
            follow_advice(n, err, "add")
        return f"add {text} rc={rc} {err.strip()[:150]}"
    if kind == "batch":
        l = pick_list(st)
        if not l: return "batch skipped"
        texts = [f"i{k}b{j}" for j in range(rnd.randint(2, 6))]
        lines = "".join(f"add {l[:8]} {t}\n" for t in texts)
        it = pick_item(st)
        did = it and rnd.random() < 0.5
        if did: lines += f"done {it[:8]}\n"
        p = subprocess.run([P, "batch", "--home", home(n), "--config", f"{home(n)}/config.toml"], input=lines,
                           capture_output=True, text=True, timeout=60)
        if p.returncode < 0 or CRASH_RE.search(p.stderr):
            problem("crash", f"{n}: batch rc={p.returncode} {p.stderr[-500:]!r}")
        if p.returncode == 0 and did:
            DONES.append(dict(home=n, t=time.time(), item=it, kind="done", risk=unsynced_restore(n)))
        if p.returncode == 0:
            st2 = flat(show(n))
            for iid, v in st2.items():
                if v[1] in texts and iid not in ITEMS:
                    mark_added(n, iid, v[1], l)
            got = [t for t in texts if any(v[1] == t for v in st2.values())]
            if len(got) != len(texts):
                # an item may already be gone (a concurrent list rm); only note it
                log(f"{n}: batch rc=0 but only {got} of {texts} show on {n}")
        return f"batch {texts} rc={p.returncode} {p.stderr.strip()[:150]}"
    if kind in ("edit", "done", "reopen", "move", "rm"):
        sec = {"done": "pending", "reopen": "completed"}.get(kind)
        it = pick_item(st, sec)
        if not it: return f"{kind}: nothing"
        if kind == "edit":
            cmd = ["edit", it[:8], f"{ITEMS.get(it, {}).get('text', 'x')}e{k}"]
        elif kind == "move":
            r = rnd.random()
            if r < 0.4:
                l = pick_list(st); cmd = ["move", it[:8], "--to", l[:8]]
                if it in ITEMS: ITEMS[it]["lists"].add(l)
            elif r < 0.7: cmd = ["move", it[:8], "--top"]
            else:
                o = pick_item(st)
                if not o or o == it: return "move: nothing"
                cmd = ["move", it[:8], "--after", o[:8]]
                if it in ITEMS: ITEMS[it]["lists"].add(flat(st)[o][0])
        else:
            cmd = [kind, it[:8]]
        rc, out, err, _ = run(n, *cmd)
        if rc == 0 and kind in ("done", "reopen"):
            DONES.append(dict(home=n, t=time.time(), item=it, kind=kind, risk=unsynced_restore(n)))
        if rc == 0 and kind == "edit":
            EDITS.append(dict(home=n, t=time.time(), item=it, text=cmd[2], risk=unsynced_restore(n)))
        if rc == 0 and kind == "rm":
            REMOVED.add(it)
            if n in SINCE_BACKUP: RM_SINCE_BACKUP.setdefault(n, set()).add(it)
            if unsynced_restore(n): RM_ATRISK.add(it)   # documented: may be kept aside, not made again
        if rc != 0:
            follow_advice(n, err, kind)
        return f"{' '.join(cmd)} rc={rc} {err.strip()[:150]}"
    if kind in ("lren", "lrm", "lmove"):
        l = pick_list(st)
        if kind == "lren":
            rc, out, err, _ = run(n, "list", "rename", l[:8], f"R{k}")
        elif kind == "lmove":
            ls = [x["id"] for x in st["lists"]]
            if rnd.random() < 0.5 or len(ls) < 2: rc, out, err, _ = run(n, "list", "move", l[:8], "--top")
            else:
                o = rnd.choice([x for x in ls if x != l] or [l])
                rc, out, err, _ = run(n, "list", "move", l[:8], "--after", o[:8])
        else:
            before = [i for i, v in flat(st).items() if v[0] == l]
            rc, out, err, _ = run(n, "list", "rm", l[:8])
            if rc == 0:
                LISTRM.add(l)
                for i in before: SOFT[i] = f"list rm {l[:8]} on {n}"
        if rc != 0:
            follow_advice(n, err, "list " + kind)
        return f"list {kind} {l[:8]} rc={rc} {err.strip()[:150]}"

def op_compact(n):
    ka = rnd.choice([None, None, 0.02, 0.05, 0.1, 0.2])
    rc, out, err, killed = run(n, "compact", kill_after=ka)
    if not killed and rc != 0:
        follow_advice(n, err, "compact")
    return f"compact kill_after={ka} killed={killed} rc={rc} {(out+err).strip()[:160]!r}"

def op_killed_add(n):
    st = show(n); l = pick_list(st)
    if not l: return "killed add: no list"
    counter[0] += 1; text = f"i{counter[0]}k"
    rc, out, err, killed = run(n, "add", l[:8], text, "--json", kill_after=rnd.choice([0.005, 0.01, 0.02, 0.04]))
    if not killed and rc == 0:
        mark_added(n, json.loads(out)["id"], text, l)
        return f"add {text} (not killed) rc=0"
    time.sleep(0.3)
    for iid, v in flat(show(n)).items():
        if v[1] == text:
            mark_added(n, iid, text, l)
            return f"killed add {text}: written ({iid[:8]})"
    return f"killed add {text}: not written (killed={killed} rc={rc})"

def op_sync(n):
    ka = 0.05 if rnd.random() < 0.1 else None
    rc, out, err, killed = run(n, "sync", "--no-discovery", "--timeout", "10", kill_after=ka, timeout=60)
    if rc == 0: UNSYNCED[n] = False
    if not killed and rc != 0:
        follow_advice(n, out + err, "sync")
    return f"sync killed={killed} rc={rc} {(out+err).strip()[:200]!r}"

def op_bulk(n):
    """a batch of 200-800 adds: bigger baselines and longer transfers for the kills to land in"""
    st = show(n); l = pick_list(st)
    if not l: return "bulk: no list"
    counter[0] += 1; k = counter[0]; cnt = rnd.randint(200, 800)
    texts = [f"i{k}u{j}" for j in range(cnt)]
    p = subprocess.run([P, "batch", "--home", home(n), "--config", f"{home(n)}/config.toml"],
                       input="".join(f"add {l[:8]} {t}\n" for t in texts), capture_output=True, text=True, timeout=120)
    if p.returncode < 0 or CRASH_RE.search(p.stderr):
        problem("crash", f"{n}: bulk batch rc={p.returncode} {p.stderr[-500:]!r}")
    if p.returncode == 0:
        ts = set(texts)
        for iid, v in flat(show(n)).items():
            if v[1] in ts and iid not in ITEMS: mark_added(n, iid, v[1], l)
    return f"bulk {cnt} adds rc={p.returncode} {p.stderr.strip()[:150]}"

DOWN_UNTIL = {}
def op_agent_kill(n):
    if n not in AGENTS: return "agent kill: not running"
    rc = stop_agent(n, signal.SIGKILL)
    if rnd.random() < 0.5:
        start_agent(n); return f"agent SIGKILL+restart"
    AGENT_WANTED[n] = False
    DOWN_UNTIL[n] = time.time() + rnd.uniform(3, 15)
    return f"agent SIGKILL, down for a while"

def op_agent_stop(n):
    if n not in AGENTS: return "agent stop: not running"
    stop_agent(n, signal.SIGTERM)
    AGENT_WANTED[n] = False
    DOWN_UNTIL[n] = time.time() + rnd.uniform(5, 25)
    return "agent stopped for a while"

def op_backup(n):
    if n in BACKUP or NORESTORE: return "backup: already"
    if PLAIT_RESTORE:
        d = f"{W}/backup-{n}-{counter[0]}"
        rc, out, err, _ = run(n, "backup", d)
        if rc != 0:
            problem("backup", f"{n}: plait backup failed: {err[-300:]!r}")
            return "backup failed"
        BACKUP[n] = d; SINCE_BACKUP[n] = set(); BACKUP_T[n] = time.time()
        return f"backup of {n} to {d} (plait backup)"
    running = n in AGENTS
    if running: stop_agent(n, rnd.choice([signal.SIGTERM, signal.SIGKILL]))
    d = f"{W}/backup-{n}-{counter[0]}"
    subprocess.run(["cp", "-a", home(n), d], check=True)
    BACKUP[n] = d; SINCE_BACKUP[n] = set(); BACKUP_T[n] = time.time()
    if running: start_agent(n)
    return f"backup of {n} to {d}"

def op_restore(n):
    if n not in BACKUP: return "restore: no backup"
    running = n in AGENTS
    if running: stop_agent(n)
    keep = rnd.random() < 0.3   # the same backup may be restored again later
    if keep: d = BACKUP[n]; since = set(SINCE_BACKUP[n])
    else: d = BACKUP.pop(n); since = SINCE_BACKUP.pop(n)
    if PLAIT_RESTORE:
        rc, out, err, _ = run(n, "restore", d)
        if rc != 0:
            problem("restore", f"{n}: plait restore failed: {err[-300:]!r}")
    else:
        shutil.rmtree(home(n))
        subprocess.run(["cp", "-a", d, home(n)], check=True)
    # which items are now held nowhere? (documented loss: made here after the backup, never synced)
    present = set(); shown = {}
    for m in NAMES:
        shown[m] = set(flat(show(m)).keys())
        present |= shown[m]
    for i in (set(RM_SINCE_BACKUP.get(n, set())) if keep else RM_SINCE_BACKUP.pop(n, set())):
        # made after the backup: whether it reached another home first cannot be told from `show`
        RM_ATRISK.add(i)
    lost = [i for i in since if i not in present and i not in REMOVED]
    for i in lost:
        ATRISK[i] = f"added on {n} after its backup, on no other home at the restore"
    # items added elsewhere, that only this home held before the restore: check too
    other = [i for i in ITEMS if i not in present and i not in REMOVED and i not in ATRISK and i not in SOFT]
    for i in other:
        ATRISK[i] = f"held nowhere after the restore of {n} (added on {ITEMS[i]['home']})"
    RESTORED.add(n); UNSYNCED[n] = True
    for e in EDITS + DONES:
        if e["home"] == n and e["t"] > BACKUP_T.get(n, 0): e["risk"] = True
    if CAREFUL:
        AGENT_WANTED[n] = True; DOWN_UNTIL.pop(n, None); start_agent(n); time.sleep(0.3)
        rc, out, err, _ = run(n, "sync", "--no-discovery", "--timeout", "10")
        log(f"{n}: careful sync after the restore: rc={rc} {(out+err).strip()[:400]!r}")
        if rc != 0: follow_advice(n, out + err, "sync after restore")
        running = "careful"
    elif running and rnd.random() < 0.5:
        AGENT_WANTED[n] = False; DOWN_UNTIL[n] = time.time() + rnd.uniform(5, 20); running = "later"
    elif running: start_agent(n)
    return f"restore (agent {running}) {n} from {d}: {len(since)} items added since backup, {len(lost)} held nowhere; {len(other)} others held nowhere"

# ---------------------------------------------------------------- set up
shutil.rmtree(W, ignore_errors=True); os.makedirs(W)
for n in NAMES:
    subprocess.run([P, "init", "--home", home(n), "--name", n], check=True, capture_output=True)
    iv = rnd.choice([0, 1, 2, 4])
    with open(f"{home(n)}/config.toml", "w") as f:
        f.write(f'[api]\nlisten = ""\n[discovery]\nenabled = false\n[compaction]\ninterval_seconds = {iv}\n')
    log(f"home {n}: compaction.interval_seconds = {iv}")
ids = {n: subprocess.run([P, "id", "--home", home(n)], capture_output=True, text=True).stdout.strip().splitlines()[-1] for n in NAMES}
for x in NAMES:
    for y in NAMES:
        if x != y:
            r = run(x, "pair", "--trust", ids[y], "--address", f"127.0.0.1:{port(y)}")
            assert r[0] == 0, r
for n in NAMES: start_agent(n)
time.sleep(0.5)
run("a", "list", "add", "Start")

# ---------------------------------------------------------------- schedule
ops = [(op_data, 60), (op_compact, 10), (op_killed_add, 3), (op_sync, 5), (op_agent_kill, 3), (op_agent_stop, 2),
       (op_backup, 1.2), (op_restore, 1.2), (op_bulk, 0.7)]
i = 0
try:
    while time.time() - T0 < SECONDS:
        i += 1
        for n, t in list(DOWN_UNTIL.items()):
            if time.time() >= t:
                del DOWN_UNTIL[n]; AGENT_WANTED[n] = True; start_agent(n); log(f"{n}: agent back up")
        check_agents_alive()
        n = rnd.choice(NAMES)
        f = rnd.choices([o for o, w in ops], [w for o, w in ops])[0]
        what = f(n)
        log(f"op {i} {n} {f.__name__}: {what}")
        if rnd.random() < 0.2:
            time.sleep(rnd.uniform(0, 0.5))

    # ------------------------------------------------------------ heal
    log("=== heal")
    DOWN_UNTIL.clear()
    for n in NAMES: AGENT_WANTED[n] = True; start_agent(n)
    time.sleep(2)
    check_agents_alive()
    HEAL = []
    for rnd_i in range(3):
        for n in NAMES:
            rc, out, err, _ = run(n, "sync", "--no-discovery", "--timeout", "20", timeout=90)
            txt = (out + err).strip()
            HEAL.append((rnd_i, n, rc, txt))
            log(f"heal sync {rnd_i} {n}: rc={rc} {txt[:600]!r}")
            if rc != 0:
                follow_advice(n, txt, f"heal sync {rnd_i}")
        time.sleep(1)
    # wait for digests to agree
    deadline = time.time() + 40
    while True:
        check_agents_alive()
        st = {}
        for n in NAMES:
            rc, out, err, _ = run(n, "status", "--json")
            st[n] = json.loads(out) if rc == 0 else {}
        digs = {n: (s.get("digest") or s.get("state_digest")) for n, s in st.items()}
        if len(set(digs.values())) == 1 or time.time() > deadline:
            break
        time.sleep(1)
    log("digests: " + json.dumps(digs))
    if len(set(digs.values())) != 1 and RESTORED:
        problem("no-converge-after-sync", "digests differ after the heal syncs: " + json.dumps({n: d[:12] for n, d in digs.items()}))
        log(f"=== heal phase 2: doctor says 'on the device that is a copy (or restored from a backup), run plait rejoin': rejoin on {sorted(RESTORED)}")
        for n in sorted(RESTORED):
            rc, out, err, _ = run(n, "rejoin"); ADVICE.append((n, "heal phase 2", "rejoin", rc, (out+err).strip()[:300]))
            log(f"{n}: rejoin rc={rc} {(out+err).strip()[:300]!r}")
        for rnd_i in range(2):
            for n in NAMES:
                rc, out, err, _ = run(n, "sync", "--no-discovery", "--timeout", "20", timeout=90)
                log(f"heal2 sync {rnd_i} {n}: rc={rc} {(out+err).strip()[:400]!r}")
        deadline = time.time() + 20
        while True:
            digs = {n: json.loads(run(n, "status", "--json")[1] or "{}").get("digest") for n in NAMES}
            if len(set(digs.values())) == 1 or time.time() > deadline: break
            time.sleep(1)
        log("digests after the rejoin: " + json.dumps(digs))
    # doctor with the agents up
    DOCTOR = {}
    for n in NAMES:
        rc, out, err, _ = run(n, "doctor", timeout=120)
        DOCTOR[n] = (rc, out + err)
    peers = {n: run(n, "peers")[1] for n in NAMES}
finally:
    for n in list(AGENTS):
        stop_agent(n)

# ---------------------------------------------------------------- checks
final = {n: show(n) for n in NAMES}
status = {}
for n in NAMES:
    rc, out, err, _ = run(n, "status", "--json")
    status[n] = json.loads(out) if rc == 0 else {"error": err}
canon = {n: json.dumps(final[n], sort_keys=True) for n in NAMES}
if len(set(canon.values())) != 1:
    problem("diverged-show", "show --json differs: " + ", ".join(f"{n}:{len(flat(final[n]))} items" for n in NAMES))
digs = {n: status[n].get("digest") for n in NAMES}
if len(set(digs.values())) != 1:
    problem("diverged-digest", json.dumps({n: [status[n].get("digest", "")[:12], status[n].get("summary")] for n in NAMES}))
for n in NAMES:
    f = flat(final[n])
    for iid, info in ITEMS.items():
        if iid in f or iid in REMOVED: continue
        if iid in ATRISK: continue
        lr = [l for l in info["lists"] if l in LISTRM]
        if iid in SOFT or lr:
            log(f"note: {n} lacks {info['text']} ({iid[:8]}) — possibly by a list rm ({SOFT.get(iid, lr)})")
            continue
        problem("lost", f"{n} lacks item {info['text']} ({iid[:8]}) added on {info['home']} at t={info['t']:.1f}")
    for iid in REMOVED:
        if iid in f and iid in RM_ATRISK:
            log(f"note: {n} shows {f[iid][1]} ({iid[:8]}) that a successful rm removed, made after a backup and undone by its restore")
        elif iid in f:
            problem("resurrected", f"{n} shows {f[iid][1]} ({iid[:8]}) that a successful rm removed (no restore explains it)")
# edits: an item that some successful edit renamed must not show its original text (unless every edit was at risk)
fa = flat(final["a"])
for iid, info in ITEMS.items():
    es = [e for e in EDITS if e["item"] == iid]
    if iid in fa and es and fa[iid][1] == info["text"]:
        if all(e["risk"] for e in es):
            log(f"note: {info['text']} ({iid[:8]}) shows its original text; its edits were all undone by restores")
        else:
            problem("edit-lost", f"{info['text']} ({iid[:8]}) shows its original text after {len(es)} successful edits: " + ", ".join(f"{e['home']}@{e['t']-T0:.1f}->{e['text']}{'(risk)' if e['risk'] else ''}" for e in es))
# done/reopen: the last one (by wall time, 3 s apart from any other) decides, unless a restore undid it
for iid in set(e["item"] for e in DONES):
    es = sorted([e for e in DONES if e["item"] == iid], key=lambda e: e["t"])
    last = es[-1]
    if last["risk"] or iid not in fa: continue
    if len(es) > 1 and last["t"] - es[-2]["t"] < 3: continue
    if (fa[iid][2]) != (last["kind"] == "done"):
        problem("done-lost", f"{fa[iid][1]} ({iid[:8]}) is {'completed' if fa[iid][2] else 'pending'} but the last of its {len(es)} done/reopen was `{last['kind']}` on {last['home']} at t={last['t']-T0:.1f}")
# doctor: should pass once everything converged and is held
for n, (rc, txt) in DOCTOR.items():
    fails = [l for l in txt.splitlines() if "FAIL" in l or "WARN" in l or "warn" in l.split()[:1]]
    if rc != 0 or fails:
        log(f"doctor {n} rc={rc}:\n" + "\n".join("   " + l for l in txt.splitlines() if not l.strip().startswith("ok")))
    if rc == 0 and len(set(canon.values())) != 1:
        problem("doctor-silent", f"{n}: doctor rc=0 although the devices did not converge")
    if rc != 0 and len(set(canon.values())) == 1:
        problem("doctor", f"{n}: doctor rc={rc} although the devices converged: " + " / ".join(fails)[:800])
for n in NAMES:
    log(f"peers {n}: " + " / ".join(l.split("  ")[-1] for l in peers.get(n, "").splitlines()))
    if len(set(canon.values())) != 1 and "in sync" in peers.get(n, ""):
        log(f"note: peers on {n} says 'in sync' while show differs")
# crashes in agent logs
for n in NAMES:
    with open(f"{W}/{n}.log") as f:
        for l in f:
            if CRASH_RE.search(l):
                problem("agent-crash", f"{n}: {l.strip()[:400]}")
print("---- failure messages seen (normalized, count, example):")
for k, (c, ex) in sorted(MESSAGES.items(), key=lambda x: -x[1][0]):
    print(f"  {c:4d}  {k}\n        e.g. {ex[:400]!r}")
print("restored homes:", sorted(RESTORED))
print("---- advice followed:")
for a in ADVICE: print("  ", a)
print(f"items tracked {len(ITEMS)}, removed {len(REMOVED)}, soft {len(SOFT)}, at risk {len(ATRISK)}, final {len(flat(final['a']))}")
kinds = sorted(set(k for k, _ in PROBLEMS))
print(f"RESULT seed={SEED} {'ok' if not PROBLEMS else 'FAIL ' + ','.join(kinds)} elapsed={time.time()-T0:.0f}s", flush=True)
cleanup()
sys.exit(1 if PROBLEMS else 0)
