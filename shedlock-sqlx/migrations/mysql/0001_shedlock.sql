-- shedlock-sqlx: the lock table for MySqlLockProvider (MySQL and MariaDB; Java ShedLock's layout
-- plus fencing_token, binary collation so lock names compare exactly). Times are UTC wall-clock
-- values. Same statement as MySqlLockProvider::create_table_if_not_exists().
CREATE TABLE IF NOT EXISTS shedlock (
    name VARCHAR(64) NOT NULL,
    lock_until TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    locked_by VARCHAR(255) NOT NULL,
    fencing_token BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
