import GRDB

/// Named, forward-only migrations. Never edit one that has landed; add a new one.
enum Schema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-changes-state") { db in
            try db.execute(
                sql: """
                    CREATE TABLE meta (
                        key TEXT PRIMARY KEY NOT NULL,
                        value BLOB
                    ) WITHOUT ROWID;

                    -- tl is the timeline ID with its sign bit flipped: SQLite's signed order is then the
                    -- unsigned order that replay order needs. The table is clustered in replay order, so a
                    -- full replay is one sequential scan; (tl, seq) is unique through its own index. A change's own hash is the next change's prev
                    -- (or the timelines row's head_hash), so it is not stored twice.
                    CREATE TABLE changes (
                        tl INTEGER NOT NULL,
                        seq INTEGER NOT NULL CHECK (seq >= 1),
                        lamport INTEGER NOT NULL CHECK (lamport >= 1),
                        kind TEXT NOT NULL CHECK (length(kind) > 0),
                        version INTEGER NOT NULL CHECK (version >= 0),
                        wall INTEGER NOT NULL,
                        prev BLOB NOT NULL CHECK (length(prev) = 32),
                        payload BLOB NOT NULL,
                        PRIMARY KEY (lamport, tl, seq)
                    ) WITHOUT ROWID;
                    CREATE UNIQUE INDEX changes_by_timeline ON changes (tl, seq);

                    -- One row per timeline ever held: the summary, and the head hash and Lamport time
                    -- (also for timelines wholly folded into the baseline).
                    CREATE TABLE timelines (
                        tl INTEGER PRIMARY KEY NOT NULL,
                        head_seq INTEGER NOT NULL CHECK (head_seq >= 1),
                        head_lamport INTEGER NOT NULL,
                        head_hash BLOB NOT NULL CHECK (length(head_hash) = 32),
                        ended INTEGER NOT NULL DEFAULT 0 CHECK (ended IN (0, 1))
                    );

                    CREATE TABLE baseline (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        summary TEXT NOT NULL,
                        max_lamport INTEGER NOT NULL,
                        data BLOB NOT NULL
                    );

                    CREATE TABLE checkpoints (
                        lamport INTEGER NOT NULL,
                        tl INTEGER NOT NULL,
                        seq INTEGER NOT NULL,
                        snapshot BLOB NOT NULL,
                        PRIMARY KEY (lamport, tl, seq)
                    ) WITHOUT ROWID;

                    -- The materialized state of the lists domain, kept in step with the changes.
                    CREATE TABLE lists (
                        id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
                        title TEXT NOT NULL,
                        color TEXT,
                        deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),
                        stamp_lamport INTEGER NOT NULL,
                        stamp_tl INTEGER NOT NULL,
                        stamp_seq INTEGER NOT NULL,
                        prev BLOB, next BLOB,
                        pending_head BLOB, pending_tail BLOB,
                        completed_head BLOB, completed_tail BLOB
                    ) WITHOUT ROWID;

                    CREATE TABLE items (
                        id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
                        list BLOB NOT NULL CHECK (length(list) = 16),
                        text TEXT NOT NULL,
                        completed INTEGER NOT NULL CHECK (completed IN (0, 1)),
                        deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),
                        placed_tl INTEGER NOT NULL,
                        placed_seq INTEGER NOT NULL,
                        stamp_lamport INTEGER NOT NULL,
                        stamp_tl INTEGER NOT NULL,
                        stamp_seq INTEGER NOT NULL,
                        prev BLOB, next BLOB
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v2-peers") { db in
            try db.execute(
                sql: """
                    -- Devices this one trusts, by Device ID (the grouped text form, checked on input).
                    CREATE TABLE peers (
                        device_id TEXT PRIMARY KEY NOT NULL CHECK (length(device_id) = 63),
                        name TEXT NOT NULL,
                        address TEXT,
                        paired_at INTEGER NOT NULL,
                        last_seen INTEGER,
                        last_summary TEXT
                    ) WITHOUT ROWID;

                    -- Devices that connected without being paired: at most 16, names unverified.
                    CREATE TABLE pending_peers (
                        device_id TEXT PRIMARY KEY NOT NULL CHECK (length(device_id) = 63),
                        name TEXT NOT NULL,
                        address TEXT,
                        first_seen INTEGER NOT NULL,
                        last_seen INTEGER NOT NULL,
                        attempts INTEGER NOT NULL DEFAULT 1
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v3-staged-baselines") { db in
            try db.execute(
                sql: """
                    -- A baseline being pulled from a peer, one row per received chunk, kept across connections so an
                    -- interrupted transfer resumes at the staged size. Swapped in (and deleted) in one transaction
                    -- once complete; never read by replay before that.
                    CREATE TABLE staged_baselines (
                        peer TEXT PRIMARY KEY NOT NULL,
                        summary TEXT NOT NULL,
                        -- SHA-256 of the whole encoded baseline as the peer's Hello announced it; NULL when the
                        -- transfer began with a baseline other than the announced one (it then cannot resume).
                        digest BLOB CHECK (digest IS NULL OR length(digest) = 32),
                        total INTEGER NOT NULL CHECK (total >= 1)
                    ) WITHOUT ROWID;
                    CREATE TABLE staged_baseline_chunks (
                        peer TEXT NOT NULL REFERENCES staged_baselines (peer) ON DELETE CASCADE,
                        offset INTEGER NOT NULL CHECK (offset >= 0),
                        data BLOB NOT NULL,
                        PRIMARY KEY (peer, offset)
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v4-sad-path") { db in
            try db.execute(
                sql: """
                    -- Stored changes whose hash chain broke (bit rot, a hand-edited row): set aside with the rest of
                    -- their timeline, never deleted, until good copies are pulled again from a peer (DESIGN §10).
                    CREATE TABLE quarantine (
                        tl INTEGER NOT NULL,
                        seq INTEGER NOT NULL,
                        lamport INTEGER NOT NULL,
                        kind TEXT NOT NULL,
                        version INTEGER NOT NULL,
                        wall INTEGER NOT NULL,
                        prev BLOB NOT NULL,
                        payload BLOB NOT NULL,
                        reason TEXT NOT NULL,
                        at INTEGER NOT NULL,
                        PRIMARY KEY (tl, seq)
                    ) WITHOUT ROWID;

                    -- Timelines that a peer holds with a different history under the same numbers, as the last
                    -- session with that peer found them (reported until a session finds them no longer).
                    CREATE TABLE forks (
                        peer TEXT NOT NULL,
                        tl INTEGER NOT NULL,
                        seq INTEGER NOT NULL,
                        detail TEXT NOT NULL,
                        first_seen INTEGER NOT NULL,
                        last_seen INTEGER NOT NULL,
                        PRIMARY KEY (peer, tl)
                    ) WITHOUT ROWID;

                    -- What the last session with a paired device found wrong, one sentence each, NULL when nothing:
                    -- equal summaries and baselines with different state digests; changes refused from it; a claim
                    -- to hold this device's own timeline beyond its head.
                    ALTER TABLE peers ADD COLUMN diverged TEXT;
                    ALTER TABLE peers ADD COLUMN refused TEXT;
                    ALTER TABLE peers ADD COLUMN claim TEXT;
                    """)
        }
        // Copied homes (DESIGN §11): one row per Device ID seen running from several homes at once, a peer's or
        // this device's own; `instances` holds the instance nonces seen, hexadecimal, comma-separated.
        migrator.registerMigration("v5-copied-homes") { db in
            try db.execute(
                sql: """
                    CREATE TABLE copied_homes (
                        device_id TEXT PRIMARY KEY NOT NULL,
                        instances TEXT NOT NULL,
                        first_seen INTEGER NOT NULL,
                        last_seen INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v6-succession") { db in
            try db.execute(
                sql: """
                    -- Receiving side of `plait rejoin --new-key` (PROTOCOL.md §21): the Device ID a peer's signed
                    -- succession statement named as its successor; the peer itself stays trusted (the other copy of
                    -- a copied home still uses that ID).
                    ALTER TABLE peers ADD COLUMN succeeded_by TEXT;

                    -- Sending side: the peers that still have to learn this device's new Device ID, each with the
                    -- retired Device ID it trusts (the identity in `retired/` to dial it with). A row goes once a
                    -- session carrying the statement succeeded with that peer.
                    CREATE TABLE succession_pending (
                        peer TEXT PRIMARY KEY NOT NULL CHECK (length(peer) = 63),
                        retired TEXT NOT NULL CHECK (length(retired) = 63)
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v7-signed-timelines") { db in
            try db.execute(
                sql: """
                    -- Signed timelines (DESIGN §11). A change's Lamport witness (both NULL or both set: hashed, field
                    -- 9) and its signature (64 bytes r || s, beside the hashed bytes, kept only once verified). Rows
                    -- written before this migration have neither, and their bytes and hashes are unchanged.
                    ALTER TABLE changes ADD COLUMN witness_tl INTEGER;
                    ALTER TABLE changes ADD COLUMN witness_seq INTEGER CHECK (
                        (witness_tl IS NULL) = (witness_seq IS NULL) AND (witness_seq IS NULL OR witness_seq >= 1));
                    ALTER TABLE changes ADD COLUMN signature BLOB
                        CHECK (signature IS NULL OR length(signature) = 64);

                    -- Set aside with the rest of a damaged change, so good copies restore it whole.
                    ALTER TABLE quarantine ADD COLUMN witness_tl INTEGER;
                    ALTER TABLE quarantine ADD COLUMN witness_seq INTEGER;
                    ALTER TABLE quarantine ADD COLUMN signature BLOB;

                    -- certificate: the signing certificate (DER) from the timeline's begin; NULL for an unsigned
                    -- protocol-1 timeline. superseded_seq: a begin superseded this timeline at that head, so it
                    -- holds the compaction cut-off only up to there. last_arrival: when (ms) a change of it last
                    -- arrived from a peer, so a timeline of an author nobody here paired stops holding the cut-off
                    -- once it has been quiet longer than the peer grace.
                    ALTER TABLE timelines ADD COLUMN certificate BLOB
                        CHECK (certificate IS NULL OR length(certificate) > 0);
                    ALTER TABLE timelines ADD COLUMN superseded_seq INTEGER
                        CHECK (superseded_seq IS NULL OR superseded_seq >= 1);
                    ALTER TABLE timelines ADD COLUMN last_arrival INTEGER;
                    """)
        }
        migrator.registerMigration("v8-fork-branches") { db in
            try db.execute(
                sql: """
                    -- Forks resolved by renaming (DESIGN §11, PROTOCOL.md §22). A change on a losing branch is stored
                    -- under the branch's name (tl, seq) with where its author wrote it (origin_tl, origin_seq): its
                    -- bytes, hash and signature are the author's. Both NULL for every other change.
                    ALTER TABLE changes ADD COLUMN origin_tl INTEGER;
                    ALTER TABLE changes ADD COLUMN origin_seq INTEGER CHECK (
                        (origin_tl IS NULL) = (origin_seq IS NULL) AND (origin_seq IS NULL OR origin_seq >= 1));
                    CREATE INDEX changes_by_origin ON changes (origin_tl, origin_seq) WHERE origin_tl IS NOT NULL;

                    -- Every fork branch held: its name (tl), the timeline its changes' bytes carry (root), the branch
                    -- it left (parent: root or another branch), and the author's number before its first change
                    -- (its change n is the author's base + n). Permanent: the fork record of DESIGN §11.
                    CREATE TABLE fork_branches (
                        tl INTEGER PRIMARY KEY NOT NULL,
                        root INTEGER NOT NULL,
                        parent INTEGER NOT NULL,
                        base INTEGER NOT NULL CHECK (base >= 1)
                    );
                    CREATE INDEX fork_branches_by_root ON fork_branches (root);
                    """)
        }
        migrator.registerMigration("v9-acknowledged-heads") { db in
            try db.execute(
                sql: """
                    -- With a peer's acknowledged summary, the hash of the change at each of its entries as held here
                    -- then (40 bytes an entry: timeline, 8 bytes big-endian, then the hash), so that a fork renaming
                    -- those numbers later cannot make compaction fold what the peer never had (PROTOCOL.md §22.7).
                    -- NULL before this migration: such an acknowledgement covers only what precedes any fork.
                    ALTER TABLE peers ADD COLUMN last_heads BLOB;
                    """)
        }
        migrator.registerMigration("v10-fork-records") { db in
            try db.execute(
                sql: """
                    -- A branch's fork record as it travels in baselines (PROTOCOL.md §22.8): the hash of the branch's
                    -- first change and the smallest hash at that number when it was named (the rival it lost to).
                    -- NULL where the store no longer holds them (folded before this migration): such a record
                    -- names nothing and does not travel.
                    ALTER TABLE fork_branches ADD COLUMN first_hash BLOB CHECK (first_hash IS NULL OR length(first_hash) = 32);
                    ALTER TABLE fork_branches ADD COLUMN rival_hash BLOB CHECK (rival_hash IS NULL OR length(rival_hash) = 32);
                    """)
            try Store.fillForkRecordHashes(db)
        }
        migrator.registerMigration("v11-kept-aside") { db in
            try db.execute(
                sql: """
                    -- This device's own changes that an adopted baseline folds its timeline beyond and that it cannot
                    -- check against that baseline (no held change at its entry or just after it): the baseline may
                    -- hold them (a home restored from a backup) or another copy's changes at the same numbers (a
                    -- copied home). Kept here with their bytes and signatures, never deleted by plait (DESIGN §10).
                    CREATE TABLE kept_aside (
                        tl INTEGER NOT NULL,
                        seq INTEGER NOT NULL,
                        lamport INTEGER NOT NULL,
                        kind TEXT NOT NULL,
                        version INTEGER NOT NULL,
                        wall INTEGER NOT NULL,
                        prev BLOB NOT NULL,
                        payload BLOB NOT NULL,
                        witness_tl INTEGER,
                        witness_seq INTEGER,
                        signature BLOB,
                        reason TEXT NOT NULL,
                        at INTEGER NOT NULL,
                        PRIMARY KEY (tl, seq)
                    ) WITHOUT ROWID;
                    """)
        }
        // Checkpoints in a rowid table: a snapshot (9 MiB for 100,000 items) is then stored by incremental blob
        // I/O into a zeroblob of its size, written in place; in a WITHOUT ROWID table SQLite built one record
        // holding a second copy of it, the highest point of a catch-up's memory. The rows are copied over.
        migrator.registerMigration("v12-checkpoint-blobs") { db in
            try db.execute(
                sql: """
                    CREATE TABLE checkpoints_by_rowid (
                        lamport INTEGER NOT NULL,
                        tl INTEGER NOT NULL,
                        seq INTEGER NOT NULL,
                        snapshot BLOB NOT NULL,
                        UNIQUE (lamport, tl, seq)
                    );
                    INSERT INTO checkpoints_by_rowid (lamport, tl, seq, snapshot)
                        SELECT lamport, tl, seq, snapshot FROM checkpoints ORDER BY lamport, tl, seq;
                    DROP TABLE checkpoints;
                    ALTER TABLE checkpoints_by_rowid RENAME TO checkpoints;
                    """)
        }
        // A copied home known only from a peer's Notify (PROTOCOL.md §13.2 item 6) is that peer's report, not a
        // fact seen here: `reported_by` names the peer; NULL when this device saw the instances itself.
        migrator.registerMigration("v13-copied-home-reporters") { db in
            try db.execute(sql: "ALTER TABLE copied_homes ADD COLUMN reported_by TEXT")
        }
        // The devices the user unpaired here (PROTOCOL.md §21): a paired peer's succession statement naming one of
        // them as its successor is refused, so an unpair is undone only by the user pairing that device again.
        migrator.registerMigration("v14-unpaired-devices") { db in
            try db.execute(
                sql: """
                    CREATE TABLE unpaired_devices (
                        device_id TEXT PRIMARY KEY NOT NULL CHECK (length(device_id) = 63),
                        unpaired_at INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    """)
        }
        // When a paired peer last refused this device after the TLS handshake (it is not paired there), as this
        // device's agent or `plait sync` saw it; cleared when a session with it gets as far as its Hello.
        migrator.registerMigration("v15-refused-by-peer") { db in
            try db.execute(sql: "ALTER TABLE peers ADD COLUMN refused_me_at INTEGER")
        }
        // Baselines half-sent by devices unpaired since were kept (up to 256 MiB each) for a resume that cannot
        // come; `untrust` drops them from now on, and this drops those left by earlier builds.
        migrator.registerMigration("v16-unpaired-stagings") { db in try Store.dropUnpairedStagings(db) }
        // Why the last session with a paired peer failed to sync what the two hold (a refusal, a fork inside a
        // baseline, changes it announced and did not send), and when; cleared by a session that ends well. Before,
        // `doctor` and `peers` knew nothing of devices whose every session failed (bad-luck tester 2026-11-25-j, J5).
        migrator.registerMigration("v17-peer-session-failures") { db in
            try db.execute(sql: "ALTER TABLE peers ADD COLUMN failed TEXT")
            try db.execute(sql: "ALTER TABLE peers ADD COLUMN failed_at INTEGER")
        }
        return migrator
    }
}
