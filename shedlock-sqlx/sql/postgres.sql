-- shedlock lock table for PostgreSQL.
-- ShedLock's layout (times are UTC TIMESTAMPs written from clock_timestamp()) plus the fencing
-- token, which every acquisition increments. PgLockProvider::create_schema() runs the same.
CREATE TABLE IF NOT EXISTS shedlock (
    name VARCHAR(64) NOT NULL,
    lock_until TIMESTAMP NOT NULL,
    locked_at TIMESTAMP NOT NULL,
    locked_by VARCHAR(255) NOT NULL,
    fencing_token BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (name)
);

-- A table created by ShedLock (Java) keeps working once it has the token column; existing rows
-- start at token 0. Java instances may keep using the table: they never touch the new column.
ALTER TABLE shedlock ADD COLUMN IF NOT EXISTS fencing_token BIGINT NOT NULL DEFAULT 0;
