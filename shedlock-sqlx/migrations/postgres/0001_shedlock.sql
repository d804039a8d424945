-- shedlock-sqlx: the lock table for PgLockProvider (Java ShedLock's layout plus fencing_token).
-- Times are UTC wall-clock values. Same statement as PgLockProvider::create_table_if_not_exists().
CREATE TABLE IF NOT EXISTS shedlock (
    name VARCHAR(64) NOT NULL,
    lock_until TIMESTAMP NOT NULL,
    locked_at TIMESTAMP NOT NULL,
    locked_by VARCHAR(255) NOT NULL,
    fencing_token BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (name)
);
