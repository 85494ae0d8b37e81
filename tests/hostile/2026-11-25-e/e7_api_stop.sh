#!/bin/bash
# E7: SIGTERM to an agent whose local API servers (HOME/api.sock and TCP 127.0.0.1:17960) have clients open.
# usage: e7_api_stop.sh CASE    CASE: none | idle (keep-alive, after one answer) | half (half-sent request headers)
#   | sse (curl SSE stream over the unix socket) | longpoll (GET /api/events over the unix socket) | slow (a header
#   byte every 0.3 s, never finished) | all (every kind above at once, 3 of each, on both servers)
# Prints the time from SIGTERM to exit, the exit code, the log lines at error/critical level and after "stop".
. $(dirname $(readlink -f $0))/common.sh; B=$W/e7; C=${1:-none}
rm -rf $B; mkdir -p $B; mkhome $B/A api; printf '[api]\nlisten = "127.0.0.1:17960"\n[discovery]\nenabled = false\n' > $B/A/config.toml
$P agent --home $B/A --config $B/A/config.toml --no-discovery --listen 127.0.0.1:17961 > $B/A.log 2>&1 & AP=$!
for i in $(seq 1 50); do [ -S $B/A/api.sock ] && break; sleep 0.1; done; sleep 0.5
CL=""
client() { # KIND TARGET(tcp|unix)
  python3 - "$1" "$2" "$B/A/api.sock" <<'PY' &
import socket, sys, time
kind, target, path = sys.argv[1:4]
def conn():
    if target == "unix": s = socket.socket(socket.AF_UNIX); s.connect(path)
    else: s = socket.create_connection(("127.0.0.1", 17960))
    return s
s = conn(); s.settimeout(30)
try:
    if kind == "idle": s.sendall(b"GET /api/lists HTTP/1.1\r\nHost: localhost\r\n\r\n"); s.recv(65536)
    if kind == "half": s.sendall(b"GET /api/lists HTTP/1.1\r\nHost: loc")
    if kind == "longpoll": s.sendall(b"GET /api/events?timeout=60 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    if kind == "slow":
        for b in b"GET /api/lists HTTP/1.1\r\nX-Pad: " + b"a" * 1000:
            s.sendall(bytes([b])); time.sleep(0.3)
    a = time.time(); d = s.recv(65536)
    while d: d = s.recv(65536)
    print(f"client {kind}/{target}: server closed after {time.time() - a:.2f} s")
except Exception as e: print(f"client {kind}/{target}: {type(e).__name__} {e}")
PY
  CL="$CL $!"; }
case $C in
  idle|half|longpoll|slow) client $C unix; client $C tcp ;;
  sse) curl -sN --unix-socket $B/A/api.sock http://localhost/api/events/stream > $B/sse.out 2>&1 & CL="$CL $!" ;;
  all) for k in idle half longpoll slow idle half longpoll slow idle half longpoll slow; do client $k unix; client $k tcp; done
       for i in 1 2 3; do curl -sN --unix-socket $B/A/api.sock http://localhost/api/events/stream > $B/sse$i.out 2>&1 & CL="$CL $!"; done ;;
esac
sleep 2
echo "agent before stop: $(res $AP)"
T0=$(date +%s.%N); kill -TERM $AP; wait $AP; RC=$?; T1=$(date +%s.%N)
printf "case %s: agent exited rc=%s, %.2f s after SIGTERM\n" $C $RC $(echo "$T1 - $T0" | bc)
sleep 0.5; for p in $CL; do kill $p 2>/dev/null; wait $p 2>/dev/null; done
echo "log lines at error/critical:"; grep -a " error \| critical " $B/A.log | cut -c1-250
echo "log lines from the stop on:"; sed -n '/stop/,$p' $B/A.log | cut -c1-250 | head -12
