# G8: with no credential, a client that starts POST /api/session (the open sign-in) and hangs up before its body
# ends makes the agent log an ERROR line ("API POST /api/session: …"), one per connection: anyone who can reach
# the API (any local process; any machine over HTTPS) writes error lines into the agent's log at will. A normal
# agent stop with such requests in flight logs "CancellationError()" at error level for each.
# Usage: python3 g8_error_log_spam.py [N]
import socket, sys, time
import hg

n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
h = hg.make_home("g8", 18081, "127.0.0.1:18082")
open(h + ".log", "w").close()
agent = hg.start_agent(h)
try:
    a = hg.api_addr(h)
    t0 = time.time()
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", 18082))
        s.sendall((f"POST /api/session HTTP/1.1\r\nHost: {a}\r\nOrigin: http://{a}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n" + '{"code":').encode())
        s.close()
    time.sleep(2)
    lines = open(h + ".log").read().splitlines()
    errors = [l for l in lines if " error " in l]
    print(f"{n} aborted sign-ins in {time.time()-t0:.1f}s -> {len(errors)} error lines in the agent's log; first:")
    print(errors[0] if errors else "(none)")
    # a stop with sign-ins in flight
    held = []
    for i in range(20):
        s = socket.create_connection(("127.0.0.1", 18082))
        s.sendall((f"POST /api/session HTTP/1.1\r\nHost: {a}\r\nOrigin: http://{a}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n" + '{"code":').encode())
        held.append(s)
    time.sleep(0.5)
    before = len(open(h + ".log").read().splitlines())
    hg.stop_agent(agent)
    after = open(h + ".log").read().splitlines()[before:]
    print("at a normal stop (SIGTERM) with 20 sign-ins in flight:", len([l for l in after if " error " in l]),
          "error lines, e.g.", [l for l in after if " error " in l][:1])
finally:
    hg.stop_agent(agent)
