-- shedlock lock table for PostgreSQL.
-- ShedLock's layout (times are UTC TIMESTAMPs written from clock_timestamp()) plus the fencing
-- token, which every acquisition increments, and the last tick granted (milliseconds since 1970,
-- NULL for none; LockConfiguration::for_tick). PgLockProvider::create_schema() runs the same.
CREATE TABLE IF NOT EXISTS shedlock (
    name VARCHAR(64) NOT NULL,
    lock_until TIMESTAMP NOT NULL,
    locked_at TIMESTAMP NOT NULL,
    locked_by VARCHAR(255) NOT NULL,
    fencing_token BIGINT NOT NULL DEFAULT 0,
    last_tick BIGINT,
    PRIMARY KEY (name)
);

CREATE TABLE IF NOT EXISTS shedlock_runs (
    lock_name     VARCHAR(64)   NOT NULL,
    fencing_token BIGINT        NOT NULL,
    attempt       INTEGER       NOT NULL,
    job           VARCHAR(255)  NOT NULL,
    tick          TIMESTAMP,
    holder        VARCHAR(255)  NOT NULL,
    started_at    TIMESTAMP     NOT NULL,
    finished_at   TIMESTAMP,
    outcome       VARCHAR(16)   NOT NULL,
    error         VARCHAR(2000),
    PRIMARY KEY (lock_name, fencing_token, attempt)
);
CREATE INDEX IF NOT EXISTS shedlock_runs_lock_newest ON shedlock_runs (lock_name, started_at, fencing_token, attempt);
CREATE INDEX IF NOT EXISTS shedlock_runs_newest ON shedlock_runs (started_at, fencing_token, attempt);

CREATE SEQUENCE IF NOT EXISTS shedlock_board_version;
CREATE TABLE IF NOT EXISTS shedlock_board (
    board_key  VARCHAR(1024) COLLATE "C" NOT NULL,
    value      TEXT          NOT NULL,
    version    BIGINT        NOT NULL,
    written_at TIMESTAMP     NOT NULL,
    expires_at TIMESTAMP,
    PRIMARY KEY (board_key)
);

-- The fleet's board (shedlock_core::Board, Fleet): what instances publish of their jobs and what
-- operators switch (pause, run now), one row per key, in a table of its own; create_schema()
-- creates it too. Every write takes a version larger than any before it in the table, from
-- a sequence (shedlock_board_version); keys compare in byte order (COLLATE "C"). expires_at NULL: kept until removed; a row past it
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

-- A table created by ShedLock (Java) or an earlier version keeps working once it has the token
-- and last tick columns; existing rows start at token 0 with no last tick. Java instances may
-- keep using the table: they never touch the new columns (the rows they insert have no last
-- tick).
ALTER TABLE shedlock ADD COLUMN IF NOT EXISTS fencing_token BIGINT NOT NULL DEFAULT 0;
ALTER TABLE shedlock ADD COLUMN IF NOT EXISTS last_tick BIGINT;
