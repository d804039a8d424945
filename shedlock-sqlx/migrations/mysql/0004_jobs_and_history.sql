-- shedlock-sqlx: the job definitions replicas publish (LockProvider::publish_definitions) and the
-- run history (LockProviderBuilder::history), beside the lock table of 0001_shedlock.sql and named
-- from it (shedlock_jobs, shedlock_history). Times are UTC wall-clock values like lock_until; the
-- binary collation makes names compare exactly. Same statements as
-- MySqlLockProvider::create_table_if_not_exists() creates; the lock table works without them.
CREATE TABLE IF NOT EXISTS shedlock_jobs (
    job VARCHAR(255) NOT NULL,
    replica VARCHAR(255) NOT NULL,
    lock_name VARCHAR(64) NOT NULL,
    version VARCHAR(32) NOT NULL,
    spec TEXT NOT NULL,
    published TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    expires TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (job, replica)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE IF NOT EXISTS shedlock_history (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    lock_name VARCHAR(64) NOT NULL,
    fire TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    runner VARCHAR(255) NOT NULL,
    started TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    ended TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    outcome VARCHAR(16) NOT NULL,
    error VARCHAR(1000) NULL,
    KEY lock_name_id (lock_name, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
