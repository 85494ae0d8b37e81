# Sourced by this tester's shell scripts. PLAIT: the binary; homes under /tmp/hostile5; ports 17900-17989.
# The fourth tester's helpers (mkhome, setup, agent), with this tester's binary and scratch directory.
export PLAIT=${PLAIT:-/tmp/hostile5/bin/plait-e}
. $(dirname $(readlink -f ${BASH_SOURCE[0]}))/../2026-11-25-d/common.sh
W=/tmp/hostile5
HD=$(dirname $(readlink -f ${BASH_SOURCE[0]}))
# stopagent PID: SIGTERM and wait
stopagent() { kill -TERM $1 2>/dev/null; wait $1 2>/dev/null; }
# res PID: threads, fds, RSS kB, CPU seconds
res() { [ -d /proc/$1 ] || { echo gone; return; }; echo "threads=$(awk '/^Threads/{print $2}' /proc/$1/status) fds=$(ls /proc/$1/fd | wc -l) rss_kB=$(awk '/^VmRSS/{print $2}' /proc/$1/status) cpu_s=$(awk '{print ($14+$15)/100}' /proc/$1/stat | sed 's/.*) //')"; }
