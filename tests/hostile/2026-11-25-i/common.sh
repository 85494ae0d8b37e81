# Sourced by this tester's scripts. Binary /tmp/hostile8/bin/plait-h; homes under /tmp/hostile8; ports 18200-18299.
# The helpers are 2026-11-25-h's (mkhome, setup, pl, agent, stopagent, items), with `itemsj` added.
export PLAIT=${PLAIT:-/tmp/hostile8/bin/plait-h}
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../2026-11-25-h/common.sh"
W=/tmp/hostile8
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
