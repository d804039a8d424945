-- shedlock-sqlx: run now (LockAdmin::trigger; the scheduler's pending_triggers and
-- claim_trigger), for tables made by 0001_shedlock.sql to 0005_pause.sql (or Java ShedLock's
-- DDL): the last trigger of a job, its id, when it was asked for, when it expires, by whom, and
-- which replica took it when. Times are UTC with milliseconds, like lock_until; the text columns
-- are utf8mb4 whatever the table's default. All NULL until a job is triggered. Same columns as in
-- MySqlLockProvider::ddl(). Restart the services after running it (the provider checks the
-- table's columns once).
ALTER TABLE shedlock ADD COLUMN trigger_id BIGINT NULL;
ALTER TABLE shedlock ADD COLUMN trigger_at TIMESTAMP(3) NULL DEFAULT NULL;
ALTER TABLE shedlock ADD COLUMN trigger_expires TIMESTAMP(3) NULL DEFAULT NULL;
ALTER TABLE shedlock ADD COLUMN trigger_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
ALTER TABLE shedlock ADD COLUMN trigger_taken_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
ALTER TABLE shedlock ADD COLUMN trigger_taken_at TIMESTAMP(3) NULL DEFAULT NULL;
