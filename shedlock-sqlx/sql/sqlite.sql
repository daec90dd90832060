-- shedlock lock table for SQLite.
-- ShedLock's layout with times as TEXT 'YYYY-MM-DD HH:MM:SS.SSS' in UTC (the format of
-- strftime('%Y-%m-%d %H:%M:%f', 'now'), whose text order is time order), plus the fencing
-- token, which every acquisition increments. SqliteLockProvider::create_schema() runs the same.
CREATE TABLE IF NOT EXISTS shedlock (
    name VARCHAR(64) NOT NULL,
    lock_until TEXT NOT NULL,
    locked_at TEXT NOT NULL,
    locked_by VARCHAR(255) NOT NULL,
    fencing_token INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (name)
);

-- An older table without the token column keeps working once it has it (run once;
-- create_schema() checks first). Existing rows start at token 0.
--   ALTER TABLE shedlock ADD COLUMN fencing_token INTEGER NOT NULL DEFAULT 0;
