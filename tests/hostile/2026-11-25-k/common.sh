# hostile11 helpers: reuse 2026-11-25-i's (h's) helpers, pointed at plait-k
export PLAIT=${PLAIT:-/tmp/hostile11/bin/plait-k}
. /work/main/tests/hostile/2026-11-25-i/common.sh
P=$PLAIT; W=/tmp/hostile11/homes
# timelines HOME: the summary line of status
summ() { pl "$1" status | grep -iE 'summary|timeline' ; }
dig() { pl "$1" status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("digest") or d.get("stateDigest") or d)'; }
