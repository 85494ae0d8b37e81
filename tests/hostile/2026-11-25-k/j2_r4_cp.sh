#!/bin/bash
# j2_r4_cp.sh [EDIT] [ORDER]: the J2 case (2026-11-25-j's r4_restore_one_edit_3dev.sh, restoring with cp -a) run
# against this tester's binary, on its own ports.
export PLAIT=${PLAIT:-/tmp/hostile11/bin/plait-k}
PORT=18760 exec bash "$(dirname "$(readlink -f "$0")")/../2026-11-25-j/r4_restore_one_edit_3dev.sh" "$@"
