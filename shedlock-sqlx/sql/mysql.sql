-- shedlock lock table for MySQL and MariaDB.
-- ShedLock's layout with UTC DATETIME(3) times (written from UTC_TIMESTAMP(3); unlike TIMESTAMP
-- they do not depend on the session time zone), a case-sensitive lock name, and the fencing
-- token, which every acquisition increments, and the last tick granted (milliseconds since 1970,
-- NULL for none; LockConfiguration::for_tick). MySqlLockProvider::create_schema() runs the same.
CREATE TABLE IF NOT EXISTS shedlock (
    name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    lock_until DATETIME(3) NOT NULL,
    locked_at DATETIME(3) NOT NULL,
    locked_by VARCHAR(255) NOT NULL,
    fencing_token BIGINT NOT NULL DEFAULT 0,
    last_tick BIGINT,
    PRIMARY KEY (name)
);

CREATE TABLE IF NOT EXISTS shedlock_runs (
    lock_name     VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    fencing_token BIGINT NOT NULL,
    attempt       INTEGER NOT NULL,
    job           VARCHAR(255) NOT NULL,
    tick          DATETIME(3) NULL,
    holder        VARCHAR(255) NOT NULL,
    started_at    DATETIME(3) NOT NULL,
    finished_at   DATETIME(3) NULL,
    outcome       VARCHAR(16) NOT NULL,
    error         VARCHAR(2000) CHARACTER SET utf8mb4 NULL,
    PRIMARY KEY (lock_name, fencing_token, attempt),
    INDEX lock_newest (lock_name, started_at, fencing_token, attempt),
    INDEX newest (started_at, fencing_token, attempt)
);

CREATE TABLE IF NOT EXISTS shedlock_board (
    board_key  VARBINARY(1024) NOT NULL,
    value      TEXT CHARACTER SET utf8mb4 NOT NULL,
    version    BIGINT          NOT NULL AUTO_INCREMENT,
    written_at DATETIME(3)     NOT NULL,
    expires_at DATETIME(3)     NULL,
    PRIMARY KEY (board_key),
    KEY (version)
);

-- The fleet's board (shedlock_core::Board, Fleet): what instances publish of their jobs and what
-- operators switch (pause, run now), one row per key, in a table of its own; create_schema()
-- creates it too. Every write takes a version larger than any before it in the table, from
-- the table's AUTO_INCREMENT (persisted by InnoDB since MySQL 8.0 and MariaDB 10.2.4);
-- keys are VARBINARY, compared in byte order (1024 bytes fit an InnoDB key, where
-- VARCHAR(1024) in utf8mb4 would not). expires_at NULL: kept until removed; a row past it
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
--   ALTER TABLE shedlock_runs ADD INDEX lock_newest (lock_name, started_at, fencing_token, attempt),
--     ADD INDEX newest (started_at, fencing_token, attempt), DROP INDEX started_at;

-- A table created by ShedLock (Java) or an earlier version keeps working once it has the token
-- and last tick columns and DATETIME(3) times; create_schema() (and `shedlock schema --apply`)
-- does all, checking first. Java instances never touch the new columns. By hand:
--   ALTER TABLE shedlock ADD COLUMN fencing_token BIGINT NOT NULL DEFAULT 0;
--   ALTER TABLE shedlock ADD COLUMN last_tick BIGINT;
-- ShedLock's MySQL DDL declares TIMESTAMP(3) times, which MySQL converts through the session
-- time zone (wrong around DST changes unless every session runs in UTC). Convert them in a
-- session with the time zone ShedLock's connections used (by default the server's, which
-- create_schema() sets), which keeps the UTC values it wrote:
--   SET time_zone = @@global.time_zone;
--   ALTER TABLE shedlock MODIFY lock_until DATETIME(3) NOT NULL, MODIFY locked_at DATETIME(3) NOT NULL;
