-- shedlock-sqlx: the lock table for SqliteLockProvider. Times are UTC text
-- (YYYY-MM-DD HH:MM:SS.SSS). Same statement as SqliteLockProvider::create_table_if_not_exists().
CREATE TABLE IF NOT EXISTS shedlock (
    name VARCHAR(64) NOT NULL,
    lock_until TEXT NOT NULL,
    locked_at TEXT NOT NULL,
    locked_by VARCHAR(255) NOT NULL,
    fencing_token INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (name)
);
