-- shedlock-sqlx: run now (LockAdmin::trigger; the scheduler's pending_triggers and
-- claim_trigger), for tables made by 0001_shedlock.sql to 0005_pause.sql: the last trigger of a
-- job, its id, when it was asked for, when it expires, by whom, and which replica took it when.
-- Times are UTC text like lock_until. All NULL until a job is triggered. Same columns as in
-- SqliteLockProvider::ddl(). Restart the services after running it (the provider checks the
-- table's columns once).
ALTER TABLE shedlock ADD COLUMN trigger_id INTEGER NULL;
ALTER TABLE shedlock ADD COLUMN trigger_at TEXT NULL;
ALTER TABLE shedlock ADD COLUMN trigger_expires TEXT NULL;
ALTER TABLE shedlock ADD COLUMN trigger_by TEXT NULL;
ALTER TABLE shedlock ADD COLUMN trigger_taken_by TEXT NULL;
ALTER TABLE shedlock ADD COLUMN trigger_taken_at TEXT NULL;
