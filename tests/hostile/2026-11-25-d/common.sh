# Sourced by this tester's shell scripts. PLAIT: the binary (a copy of /tmp/hostile/plait-d); homes under /tmp/hostile4.
export PLAIT=${PLAIT:-/tmp/hostile4/bin/plait-d}; P=$PLAIT; W=/tmp/hostile4
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
