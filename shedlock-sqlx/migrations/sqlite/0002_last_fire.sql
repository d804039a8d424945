-- shedlock-sqlx: the recorded fire of scheduled jobs (LockProvider::claim_fire), for tables made by
-- 0001_shedlock.sql. NULL until a job's first fire is claimed; UTC text like lock_until
-- (YYYY-MM-DD HH:MM:SS.SSS). Same column as in SqliteLockProvider::ddl(). Restart the services
-- after running it (the provider checks the table's columns once).
ALTER TABLE shedlock ADD COLUMN last_fire TEXT NULL;
