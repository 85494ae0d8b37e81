# G1: an item text of ~100-200 KB added from the page (or by a script with the token) is stored, but the answer
# carries the whole text again in its Plait-Message header; Chromium, curl and Python's http.client refuse such a
# header, so the client reports a failure (the page: "The agent did not answer; is `plait agent` still running?")
# and the page puts the text back for another try, which adds it a second time.
# Usage: python3 g1_long_item_header.py [WORDS]   (default 25000 words "wNNNNN", about 280 KB)
import json, sys, time, subprocess
import hg, cdp

words = int(sys.argv[1]) if len(sys.argv) > 1 else 40000
h = hg.make_home("g1", 18011, "127.0.0.1:18012")
agent = hg.start_agent(h)
browser = None
try:
    a = hg.api_addr(h)
    H = {"Authorization": "Bearer " + hg.token(h)}
    hg.req(a, "POST", "/api/edit", {"op": "list.add", "title": "Long"}, H)
    text = " ".join("w%05d" % i for i in range(words))
    print("text bytes:", len(text))

    def count():
        d = json.loads(hg.req(a, "GET", "/api/show", None, H)[2])
        return len(d["lists"][0]["pending"])

    # 1. curl with the token
    open(h + ".body", "w").write(json.dumps({"op": "add", "list": "Long", "text": text}))
    r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "HTTP %{http_code}", "-H", "Authorization: " + H["Authorization"],
                        "-H", "Content-Type: application/json", "--data-binary", "@" + h + ".body", f"http://{a}/api/edit"],
                       capture_output=True, text=True)
    print("curl exit", r.returncode, r.stdout, r.stderr.strip(), "| items stored:", count())
    # 2. Python http.client with the token
    try:
        st, hd, _ = hg.req(a, "POST", "/api/edit", {"op": "add", "list": "Long", "text": text}, H)
        print("http.client", st)
    except Exception as e:
        print("http.client:", type(e).__name__, e, "| items stored:", count())
    # 3. the page in headless Chromium, signed in with a code from `plait gui`
    code, url = hg.login_code(h)
    browser = cdp.Browser(18091)
    browser.goto(url, 3)
    time.sleep(1)
    before = count()
    res = browser.js("""(async () => {
      const form = document.querySelector('form.add-item');
      const input = form.querySelector('input');
      input.value = %s;
      form.requestSubmit();
      await new Promise(r => setTimeout(r, 3000));
      const again = document.querySelector('form.add-item input');
      return {problem: document.getElementById('problem').textContent,
              fieldRefilled: again.value.length};
    })()""" % json.dumps(text))
    print("page after Add:", json.dumps(res), "| items stored before:", before, "after:", count())
    # the user believes it, and presses Add again on the text the page put back
    res = browser.js("""(async () => {
      document.querySelector('form.add-item').requestSubmit();
      await new Promise(r => setTimeout(r, 3000));
      return {problem: document.getElementById('problem').textContent};
    })()""")
    print("page after Add again:", json.dumps(res), "| items stored:", count())
finally:
    if browser:
        browser.close()
    hg.stop_agent(agent)
