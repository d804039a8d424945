-- shedlock-sqlx: the recorded fire of scheduled jobs (LockProvider::claim_fire), for tables made by
-- 0001_shedlock.sql (or Java ShedLock's DDL). NULL until a job's first fire is claimed; a UTC
-- wall-clock TIMESTAMP like lock_until. Same column as in PgLockProvider::ddl(). Restart the
-- services after running it (the provider checks the table's columns once).
ALTER TABLE shedlock ADD COLUMN last_fire TIMESTAMP NULL;
