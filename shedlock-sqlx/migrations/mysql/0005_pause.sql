-- shedlock-sqlx: pauses of scheduled jobs (LockAdmin::pause, resume; the fire claim refuses a
-- paused job's fire) and the last operator action (pause, resume, unlock), for tables made by
-- 0001_shedlock.sql to 0003_job_state.sql (or Java ShedLock's DDL): since, until (NULL: until
-- resumed), by whom and why; what was done last, by whom, when. Times are UTC with milliseconds,
-- like lock_until; the text columns are utf8mb4 whatever the table's default. All NULL until a
-- job is paused. Same columns as in MySqlLockProvider::ddl(). Restart the services after running
-- it (the provider checks the table's columns once).
ALTER TABLE shedlock ADD COLUMN paused_at TIMESTAMP(3) NULL DEFAULT NULL;
ALTER TABLE shedlock ADD COLUMN paused_until TIMESTAMP(3) NULL DEFAULT NULL;
ALTER TABLE shedlock ADD COLUMN paused_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
ALTER TABLE shedlock ADD COLUMN paused_reason VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
ALTER TABLE shedlock ADD COLUMN last_action VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
ALTER TABLE shedlock ADD COLUMN last_action_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
ALTER TABLE shedlock ADD COLUMN last_action_at TIMESTAMP(3) NULL DEFAULT NULL;
