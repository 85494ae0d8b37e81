# Sourced by this tester's scripts. Binary /tmp/hostile10/bin/plait-j; homes under /tmp/hostile10; ports 18300-18399.
# The helpers are 2026-11-25-i's (and through it 2026-11-25-h's).
export PLAIT=${PLAIT:-/tmp/hostile10/bin/plait-j}
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../2026-11-25-i/common.sh"
W=/tmp/hostile10
