#!/bin/bash
# g1_store_watch_fp.sh: normal things done beside a running agent must not make it stop (the new store-file watch).
. $(dirname $(readlink -f $0))/common.sh
D=$W/g1; setup $D 18220 a b; A=$D/a; B=$D/b
pl $A list add L >/dev/null; for i in $(seq 1 50); do echo "add L x$i"; done | pl $A batch >/dev/null
agent $B 18221; BP=$AGENT_PID; agent $A 18220; AP=$AGENT_PID; sleep 1
alive() { if kill -0 $AP 2>/dev/null; then echo "   agent alive"; else wait $AP; echo "   AGENT STOPPED rc=$?"; tail -2 $A.log | cut -c1-300; agent $A 18220; AP=$AGENT_PID; sleep 1; fi; }
step() { echo "--- $1"; eval "$2" 2>&1 | cut -c1-200 | head -4; sleep 1.5; alive; }
step "repair" "pl $A repair"
step "compact" "pl $A compact"
step "rejoin" "pl $A rejoin"
step "rejoin --new-key" "pl $A rejoin --new-key"
step "sqlite3 VACUUM" "sqlite3 $A/plait.db 'PRAGMA busy_timeout=5000; VACUUM;'"
step "sqlite3 wal_checkpoint(TRUNCATE)" "sqlite3 $A/plait.db 'PRAGMA busy_timeout=5000; PRAGMA wal_checkpoint(TRUNCATE);'"
step "sqlite3 .backup to elsewhere" "sqlite3 $A/plait.db '.backup $D/bk.db'"
step "cp -a plait.db elsewhere (backup tool)" "cp -a $A/plait.db* $D/"
step "tar of home" "tar -C $D -cf $D/a.tar a"
step "rsync home to elsewhere" "rsync -a $A/ $D/a-copy/ || cp -a $A $D/a-copy2"
step "init another home" "$P init --home $D/other --name other"
step "init on a (refused)" "pl $A init"
step "doctor" "pl $A doctor | tail -1"
step "60 concurrent adds" "for i in \$(seq 1 60); do pl $A add L c\$i >/dev/null & done; wait"
step "sqlite3 writes a row in another table (integrity_check + analyze)" "sqlite3 $A/plait.db 'PRAGMA busy_timeout=5000; PRAGMA integrity_check; ANALYZE;'"
step "touch / chmod the store" "touch $A/plait.db; chmod 600 $A/plait.db"
step "plait-h status with sqlite3 opening read-only" "sqlite3 -readonly $A/plait.db 'select count(*) from changes'"
step "rm -f stray plait.db-journal" "touch $A/plait.db-journal; rm -f $A/plait.db-journal"
step "unlink plait.db-shm (sqlite recreates?)" "true"
step "sync from b side" "pl $B sync --no-discovery --peer 127.0.0.1:18220"
stopagent $AP; stopagent $BP
echo "== a: $(items $A | wc -l) items  b: $(items $B | wc -l) items"
