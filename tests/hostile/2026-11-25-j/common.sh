# Sourced by this tester's scripts. Binary /tmp/hostile10/bin/plait-j; homes under /tmp/hostile10; ports 18300-18399.
export PLAIT=${PLAIT:-/tmp/hostile10/bin/plait-j}; P=$PLAIT; W=/tmp/hostile10
HD=$(dirname $(readlink -f ${BASH_SOURCE[0]}))
# mkhome HOME NAME: init, and a config at HOME/config.toml with no API port and no discovery
mkhome() { $P init --home "$1" --name "$2" >/dev/null && printf '[api]\nlisten = ""\n[discovery]\nenabled = false\n' > "$1/config.toml"; }
# setup DIR BASEPORT NAME...: homes DIR/NAME all pairwise paired (headless), NAME's port = BASEPORT+i
setup() { local D=$1 B=$2; shift 2; rm -rf "$D"; mkdir -p "$D"; declare -A port; local i=0 x y
  for x in "$@"; do mkhome "$D/$x" $x; port[$x]=$((B+i)); i=$((i+1)); done
  for x in "$@"; do for y in "$@"; do [ $x = $y ] && continue
    $P pair --trust $($P id --home "$D/$y" | tail -1) --address 127.0.0.1:${port[$y]} --home "$D/$x" --config "$D/$x/config.toml" >/dev/null
  done; done; }
# pl HOME args...: plait with that home and its config
pl() { local h=$1; shift; $P "$@" --home "$h" --config "$h/config.toml"; }
# agent HOME PORT [extra...]: starts an agent in the background, its log HOME.log; sets AGENT_PID
agent() { local h=$1 p=$2; shift 2; $P agent --home "$h" --config "$h/config.toml" --no-discovery --listen 127.0.0.1:$p "$@" >> "$h.log" 2>&1 & AGENT_PID=$!; AGENTS+=($AGENT_PID); }
# every agent started with `agent` is stopped when the script exits, however it exits (a pipe closed early too)
AGENTS=(); stopall() { local p; for p in "${AGENTS[@]}"; do kill -TERM $p 2>/dev/null && wait $p 2>/dev/null; done; }
trap stopall EXIT
stopagent() { kill -TERM $1 2>/dev/null; wait $1 2>/dev/null; }
# items HOME: sorted item texts from show --json (all lists)
items() { pl "$1" show --json | python3 -c '
import json,sys
d=json.load(sys.stdin)
out=[]
def walk(o):
    if isinstance(o,dict):
        if "text" in o: out.append(o["text"])
        for v in o.values(): walk(v)
    elif isinstance(o,list):
        for v in o: walk(v)
walk(d)
print("\n".join(sorted(out)))'; }
# itemsj HOME: "list|text|done" lines, sorted, including which list each item is in
itemsj() { pl "$1" show --json | python3 -c '
import json,sys
d=json.load(sys.stdin)
out=[]
for l in d.get("lists",[]):
    for sec in ("pending","completed","items"):
        for it in l.get(sec,[]) or []:
            out.append("%s|%s|%s"%(l.get("title"),it.get("text"),"x" if it.get("completed") or sec=="completed" else " "))
print("\n".join(sorted(out)))'; }
