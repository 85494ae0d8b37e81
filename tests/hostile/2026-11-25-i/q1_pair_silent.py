#!/usr/bin/env python3
# q1_pair_silent.py PORT MODE: a TCP server on 127.0.0.1:PORT. MODE silent: accept, say nothing;
# drip: accept, send one byte of a TLS record header every 2 s; close: accept and close at once;
# backlog: listen(1) and never accept (the kernel completes the handshake for the first ones).
import socket, sys, time, threading
port, mode = int(sys.argv[1]), sys.argv[2]
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", port)); s.listen(1)
if mode == "backlog":
    time.sleep(120); sys.exit()
def serve(c):
    if mode == "close": c.close(); return
    if mode == "drip":
        for b in b"\x16\x03\x03\x00\x40" + b"\x00" * 60:
            try: c.send(bytes([b])); time.sleep(2)
            except OSError: return
    time.sleep(120)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
