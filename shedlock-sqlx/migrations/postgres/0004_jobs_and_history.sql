-- shedlock-sqlx: the job definitions replicas publish (LockProvider::publish_definitions) and the
-- run history (LockProviderBuilder::history), beside the lock table of 0001_shedlock.sql and named
-- from it (shedlock_jobs, shedlock_history). Times are UTC wall-clock values like lock_until.
-- Same statements as PgLockProvider::create_table_if_not_exists() creates; the lock table works
-- without them.
CREATE TABLE IF NOT EXISTS shedlock_jobs (
    job VARCHAR(255) NOT NULL,
    replica VARCHAR(255) NOT NULL,
    lock_name VARCHAR(64) NOT NULL,
    version VARCHAR(32) NOT NULL,
    spec TEXT NOT NULL,
    published TIMESTAMP NOT NULL,
    expires TIMESTAMP NOT NULL,
    PRIMARY KEY (job, replica)
);
CREATE TABLE IF NOT EXISTS shedlock_history (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lock_name VARCHAR(64) NOT NULL,
    fire TIMESTAMP NOT NULL,
    runner VARCHAR(255) NOT NULL,
    started TIMESTAMP NOT NULL,
    ended TIMESTAMP NOT NULL,
    outcome VARCHAR(16) NOT NULL,
    error VARCHAR(1000) NULL
);
CREATE INDEX IF NOT EXISTS shedlock_history_idx ON shedlock_history (lock_name, id);
