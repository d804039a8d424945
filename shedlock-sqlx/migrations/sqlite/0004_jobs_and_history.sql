-- shedlock-sqlx: the job definitions replicas publish (LockProvider::publish_definitions) and the
-- run history (LockProviderBuilder::history), beside the lock table of 0001_shedlock.sql and named
-- from it (shedlock_jobs, shedlock_history). Times are UTC text like lock_until
-- (YYYY-MM-DD HH:MM:SS.SSS). Same statements as SqliteLockProvider::create_table_if_not_exists()
-- creates; the lock table works without them.
CREATE TABLE IF NOT EXISTS shedlock_jobs (
    job VARCHAR(255) NOT NULL,
    replica VARCHAR(255) NOT NULL,
    lock_name VARCHAR(64) NOT NULL,
    version VARCHAR(32) NOT NULL,
    spec TEXT NOT NULL,
    published TEXT NOT NULL,
    expires TEXT NOT NULL,
    PRIMARY KEY (job, replica)
);
CREATE TABLE IF NOT EXISTS shedlock_history (
    id INTEGER PRIMARY KEY,
    lock_name VARCHAR(64) NOT NULL,
    fire TEXT NOT NULL,
    runner VARCHAR(255) NOT NULL,
    started TEXT NOT NULL,
    ended TEXT NOT NULL,
    outcome VARCHAR(16) NOT NULL,
    error TEXT NULL
);
CREATE INDEX IF NOT EXISTS shedlock_history_idx ON shedlock_history (lock_name, id);
