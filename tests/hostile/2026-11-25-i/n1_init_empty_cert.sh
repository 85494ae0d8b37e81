#!/bin/bash
# n1_init_empty_cert.sh: `plait init` on homes with an empty cert.pem in various company.
. $(dirname $(readlink -f $0))/common.sh
D=$W/n1; rm -rf $D; mkdir -p $D
fresh() { rm -rf $D/$1; $P init --home $D/$1 --name $1 >/dev/null; $P id --home $D/$1 | tail -1; }
try() { echo "--- $1"; local before=$(sha256sum $D/h/key.pem 2>/dev/null | cut -c1-12); $P init --home $D/h --name h 2>&1 | cut -c1-300; echo "rc=${PIPESTATUS[0]}  key before=$before after=$(sha256sum $D/h/key.pem 2>/dev/null | cut -c1-12)  files: $(ls -A $D/h | tr '\n' ' ')"; }
fresh h >/dev/null; : > $D/h/cert.pem; rm -f $D/h/plait.db*; try "empty cert, key, no store (the killed init)"
fresh h >/dev/null; : > $D/h/cert.pem; try "empty cert, key, store (must be refused)"
fresh h >/dev/null; : > $D/h/cert.pem; sqlite3 $D/h/plait.db 'PRAGMA journal_mode' >/dev/null; mv $D/h/plait.db $D/plait.db.aside; try "empty cert, key, store moved aside by the user (README: move plait.db aside, init, sync), WAL/shm left?"
fresh h >/dev/null; : > $D/h/cert.pem; rm -f $D/h/plait.db; touch $D/h/plait.db-wal; try "empty cert, key, only plait.db-wal left"
fresh h >/dev/null; : > $D/h/cert.pem; : > $D/h/key.pem; rm -f $D/h/plait.db*; try "empty cert and empty key, no store"
fresh h >/dev/null; : > $D/h/key.pem; rm -f $D/h/plait.db*; try "empty key, good cert, no store"
fresh h >/dev/null; : > $D/h/cert.pem; rm -f $D/h/plait.db*; chmod 000 $D/h; try "empty cert, key, no store, home unreadable (root ignores)"; chmod 755 $D/h
fresh h >/dev/null; : > $D/h/cert.pem; rm -f $D/h/plait.db; ln -s $D/nowhere.db $D/h/plait.db; try "empty cert, key, plait.db a dangling symlink"
