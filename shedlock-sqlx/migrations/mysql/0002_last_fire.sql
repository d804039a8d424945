-- shedlock-sqlx: the recorded fire of scheduled jobs (LockProvider::claim_fire), for tables made by
-- 0001_shedlock.sql (or Java ShedLock's DDL). NULL until a job's first fire is claimed; UTC with
-- milliseconds, compared exactly. Same column as in MySqlLockProvider::ddl(). Restart the
-- services after running it (the provider checks the table's columns once).
ALTER TABLE shedlock ADD COLUMN last_fire TIMESTAMP(3) NULL DEFAULT NULL;
