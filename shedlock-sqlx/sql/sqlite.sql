-- shedlock lock table for SQLite.
-- ShedLock's layout with times as TEXT 'YYYY-MM-DD HH:MM:SS.SSS' in UTC (the format of
-- strftime('%Y-%m-%d %H:%M:%f', 'now'), whose text order is time order), plus the fencing
-- token, which every acquisition increments, and the last tick granted (milliseconds since 1970,
-- NULL for none; LockConfiguration::for_tick). SqliteLockProvider::create_schema() runs the same.
CREATE TABLE IF NOT EXISTS shedlock (
    name VARCHAR(64) NOT NULL,
    lock_until TEXT NOT NULL,
    locked_at TEXT NOT NULL,
    locked_by VARCHAR(255) NOT NULL,
    fencing_token INTEGER NOT NULL DEFAULT 0,
    last_tick INTEGER,
    PRIMARY KEY (name)
);

CREATE TABLE IF NOT EXISTS shedlock_runs (
    lock_name     VARCHAR(64)   NOT NULL,
    fencing_token INTEGER       NOT NULL,
    attempt       INTEGER       NOT NULL,
    job           VARCHAR(255)  NOT NULL,
    tick          TEXT,
    holder        VARCHAR(255)  NOT NULL,
    started_at    TEXT          NOT NULL,
    finished_at   TEXT,
    outcome       VARCHAR(16)   NOT NULL,
    error         VARCHAR(2000),
    PRIMARY KEY (lock_name, fencing_token, attempt)
);
CREATE INDEX IF NOT EXISTS shedlock_runs_lock_newest ON shedlock_runs (lock_name, started_at, fencing_token, attempt);
CREATE INDEX IF NOT EXISTS shedlock_runs_newest ON shedlock_runs (started_at, fencing_token, attempt);

CREATE TABLE IF NOT EXISTS shedlock_board (
    version    INTEGER PRIMARY KEY AUTOINCREMENT,
    board_key  TEXT NOT NULL UNIQUE,
    value      TEXT NOT NULL,
    written_at TEXT NOT NULL,
    expires_at TEXT
);

-- The fleet's board (shedlock_core::Board, Fleet): what instances publish of their jobs and what
-- operators switch (pause, run now), one row per key, in a table of its own; create_schema()
-- creates it too. Every write takes a version larger than any before it in the table, from
-- the row id (AUTOINCREMENT: never handed out twice, also after a delete); keys
-- compare as BINARY (byte order). expires_at NULL: kept until removed; a row past it
-- is never read and counts as absent.

-- Run records (RunLog): one row per attempt of a run of a locked job, kept beside the lock
-- table; create_schema() creates this table too. Each run's start deletes its lock's rows past
-- the newest runs_per_lock (default 1000) and every row older than the retention (default 14
-- days); a run whose heartbeat is live is never deleted. While a row's outcome is 'running',
-- finished_at holds its heartbeat deadline (RunRecord::alive_until; NULL: none), which the
-- running instance moves on; the run's end sets it to the end time.
-- The two indexes serve "newest N of this lock" (lists, rerun decisions, the per-lock trim)
-- and "newest N of all locks" (lists, the retention). A table made before them had an index on
-- started_at alone, which they replace; create_schema() adds them and drops it. By hand:
--   CREATE INDEX IF NOT EXISTS shedlock_runs_lock_newest ON shedlock_runs (lock_name, started_at, fencing_token, attempt);
--   CREATE INDEX IF NOT EXISTS shedlock_runs_newest ON shedlock_runs (started_at, fencing_token, attempt);
--   DROP INDEX IF EXISTS shedlock_runs_started;

-- An older table without the token or last tick column keeps working once it has them (run
-- once each; create_schema() checks first). Existing rows start at token 0 with no last tick.
--   ALTER TABLE shedlock ADD COLUMN fencing_token INTEGER NOT NULL DEFAULT 0;
--   ALTER TABLE shedlock ADD COLUMN last_tick INTEGER;
