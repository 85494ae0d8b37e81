# Helpers for the seventh hostile tester's scripts (2026-11-25-g): homes under /tmp/hostile6/g, loopback only,
# ports 18000-18099, the binary /tmp/hostile6/bin/plait-g. Every agent is started with Popen (no shell), so the PID
# held is the agent's own, and stopped by that PID.
import json, os, shutil, signal, socket, ssl, subprocess, sys, time, http.client, urllib.parse

PLAIT = os.environ.get("PLAIT", "/tmp/hostile6/bin/plait-g")
W = "/tmp/hostile6/g"


def run(*args, home=None, input=None, check=True, env=None):
    cmd = [PLAIT] + list(args)
    if home:
        cmd += ["--home", home, "--config", home + ".toml"]
    r = subprocess.run(cmd, capture_output=True, text=True, input=input, env=env)
    if check and r.returncode != 0:
        raise RuntimeError(f"{cmd} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def make_home(name, sync_port, api_listen, fresh=True, extra=""):
    home = f"{W}/{name}"
    if fresh and os.path.exists(home):
        shutil.rmtree(home)
    with open(home + ".toml", "w") as f:
        f.write(f'[agent]\nlisten = "127.0.0.1:{sync_port}"\npeers = []\n'
                f'[discovery]\nenabled = false\n[api]\nlisten = "{api_listen}"\n' + extra)
    if not os.path.exists(home + "/key.pem"):
        run("init", "--name", name, home=home)
    return home


def start_agent(home, log=None, preexec=None):
    log = log or home + ".log"
    out = open(log, "ab")
    p = subprocess.Popen([PLAIT, "agent", "--home", home, "--config", home + ".toml", "--no-discovery"],
                         stdout=out, stderr=out, preexec_fn=preexec)
    for _ in range(200):
        if os.path.exists(home + "/api.addr") or p.poll() is not None:
            break
        time.sleep(0.05)
    time.sleep(0.2)
    return p


def stop_agent(p, timeout=15):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode


def token(home):
    return open(home + "/api-token").read().strip()


def api_addr(home):
    return open(home + "/api.addr").read().strip()


def device_id(home):
    return run("id", home=home).stdout.strip().splitlines()[-1]


def res(pid):
    try:
        st = open(f"/proc/{pid}/status").read()
    except FileNotFoundError:
        return "gone"
    th = [l.split()[1] for l in st.splitlines() if l.startswith("Threads")][0]
    rss = [l.split()[1] for l in st.splitlines() if l.startswith("VmRSS")][0]
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return f"threads={th} fds={fds} rss_kB={rss}"


def raw(host, port, data, timeout=10, tls=False, src=None, read=True):
    """Sends raw bytes, returns what comes back until close or timeout."""
    s = socket.create_connection((host, port), timeout=timeout, source_address=(src, 0) if src else None)
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        s = ctx.wrap_socket(s)
    s.sendall(data)
    out = b""
    if not read:
        return s
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        pass
    s.close()
    return out


def req(addr, method, path, body=None, headers=None, tls=False, timeout=30):
    host, port = addr.rsplit(":", 1)
    host = host.strip("[]")
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        c = http.client.HTTPSConnection(host, int(port), timeout=timeout, context=ctx)
    else:
        c = http.client.HTTPConnection(host, int(port), timeout=timeout)
    h = dict(headers or {})
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
        h.setdefault("Content-Type", "application/json")
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict(r.getheaders()), data


def login_code(home):
    """A login code minted through the agent's Unix socket (`plait gui`)."""
    out = run("gui", home=home).stdout
    url = [w for w in out.split() if "code=" in w][0]
    return urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["code"][0], url


def session(home, addr, tls=False):
    """Signs in with a fresh code: returns (cookie header value, page key)."""
    code, url = login_code(home)
    scheme = "https" if tls else "http"
    st, hd, data = req(addr, "POST", "/api/session", {"code": code},
                       {"Origin": f"{scheme}://{addr}", "Host": addr}, tls=tls)
    assert st == 200, (st, data)
    cookie = hd["Set-Cookie"].split(";")[0]
    return cookie, json.loads(data)["page_key"]
