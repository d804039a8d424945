-- shedlock-sqlx: the job state of scheduled jobs (LockProvider::release_run), for tables made by
-- 0001_shedlock.sql and 0002_last_fire.sql: the last run (its fire, runner, start and end as UTC
-- text like lock_until, its outcome and error text), the last success and the failures since.
-- All NULL (and 0 failures) until a run is recorded. Same columns as in
-- SqliteLockProvider::ddl(). Restart the services after running it (the provider checks the
-- table's columns once).
ALTER TABLE shedlock ADD COLUMN last_run_fire TEXT NULL;
ALTER TABLE shedlock ADD COLUMN last_run_by TEXT NULL;
ALTER TABLE shedlock ADD COLUMN last_run_started TEXT NULL;
ALTER TABLE shedlock ADD COLUMN last_run_ended TEXT NULL;
ALTER TABLE shedlock ADD COLUMN last_run_outcome TEXT NULL;
ALTER TABLE shedlock ADD COLUMN last_run_error TEXT NULL;
ALTER TABLE shedlock ADD COLUMN last_success TEXT NULL;
ALTER TABLE shedlock ADD COLUMN consecutive_failures INTEGER NOT NULL DEFAULT 0;
