-- shedlock-sqlx: pauses of scheduled jobs (LockAdmin::pause, resume; the fire claim refuses a
-- paused job's fire) and the last operator action (pause, resume, unlock), for tables made by
-- 0001_shedlock.sql to 0003_job_state.sql: since, until (NULL: until resumed), by whom and why;
-- what was done last, by whom, when. Times are UTC text like lock_until. All NULL until a job is
-- paused. Same columns as in SqliteLockProvider::ddl(). Restart the services after running it
-- (the provider checks the table's columns once).
ALTER TABLE shedlock ADD COLUMN paused_at TEXT NULL;
ALTER TABLE shedlock ADD COLUMN paused_until TEXT NULL;
ALTER TABLE shedlock ADD COLUMN paused_by TEXT NULL;
ALTER TABLE shedlock ADD COLUMN paused_reason TEXT NULL;
ALTER TABLE shedlock ADD COLUMN last_action TEXT NULL;
ALTER TABLE shedlock ADD COLUMN last_action_by TEXT NULL;
ALTER TABLE shedlock ADD COLUMN last_action_at TEXT NULL;
