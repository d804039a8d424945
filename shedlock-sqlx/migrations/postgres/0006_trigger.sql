-- shedlock-sqlx: run now (LockAdmin::trigger; the scheduler's pending_triggers, claim_trigger and
-- LISTEN/NOTIFY watch), for tables made by 0001_shedlock.sql to 0005_pause.sql (or Java
-- ShedLock's DDL): the last trigger of a job, its id, when it was asked for, when it expires, by
-- whom, and which replica took it when. Times are UTC wall-clock TIMESTAMPs like lock_until. All
-- NULL until a job is triggered. Same columns as in PgLockProvider::ddl(). Restart the services
-- after running it (the provider checks the table's columns once).
ALTER TABLE shedlock ADD COLUMN trigger_id BIGINT NULL;
ALTER TABLE shedlock ADD COLUMN trigger_at TIMESTAMP NULL;
ALTER TABLE shedlock ADD COLUMN trigger_expires TIMESTAMP NULL;
ALTER TABLE shedlock ADD COLUMN trigger_by VARCHAR(255) NULL;
ALTER TABLE shedlock ADD COLUMN trigger_taken_by VARCHAR(255) NULL;
ALTER TABLE shedlock ADD COLUMN trigger_taken_at TIMESTAMP NULL;
