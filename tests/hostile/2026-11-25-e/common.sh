# Sourced by this tester's shell scripts. PLAIT: the binary; homes under /tmp/hostile5; ports 17900-17989.
export PLAIT=${PLAIT:-/tmp/hostile5/bin/plait-e}; P=$PLAIT; W=/tmp/hostile5
HD=$(dirname $(readlink -f ${BASH_SOURCE[0]}))
# mkhome HOME NAME: init, and a config at HOME/config.toml with no API port and no discovery
mkhome() { $P init --home $1 --name "$2" >/dev/null && printf '[api]\nlisten = ""\n[discovery]\nenabled = false\n' > $1/config.toml; }
# setup DIR BASEPORT NAME...: homes DIR/NAME all pairwise paired (headless), NAME's port = BASEPORT+i
setup() { local D=$1 B=$2; shift 2; rm -rf $D; mkdir -p $D; declare -A port; local i=0 x y
  for x in "$@"; do mkhome $D/$x $x; port[$x]=$((B+i)); i=$((i+1)); done
  for x in "$@"; do for y in "$@"; do [ $x = $y ] && continue
    $P pair --trust $($P id --home $D/$y | tail -1) --address 127.0.0.1:${port[$y]} --home $D/$x --config $D/$x/config.toml >/dev/null
  done; done; }
# agent HOME PORT [extra...]: starts an agent in the background, its log HOME.log; sets AGENT_PID
agent() { local h=$1 p=$2; shift 2; $P agent --home $h --config $h/config.toml --no-discovery --listen 127.0.0.1:$p "$@" >> $h.log 2>&1 & AGENT_PID=$!; }
# stopagent PID: SIGTERM and wait
stopagent() { kill -TERM $1 2>/dev/null; wait $1 2>/dev/null; }
# res PID: threads, fds, RSS kB, CPU seconds
res() { [ -d /proc/$1 ] || { echo gone; return; }; echo "threads=$(awk '/^Threads/{print $2}' /proc/$1/status) fds=$(ls /proc/$1/fd | wc -l) rss_kB=$(awk '/^VmRSS/{print $2}' /proc/$1/status) cpu_s=$(awk '{print ($14+$15)/100}' /proc/$1/stat | sed 's/.*) //')"; }
