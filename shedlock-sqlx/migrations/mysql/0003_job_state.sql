-- shedlock-sqlx: the job state of scheduled jobs (LockProvider::release_run), for tables made by
-- 0001_shedlock.sql and 0002_last_fire.sql (or Java ShedLock's DDL): the last run (its fire,
-- runner, start and end in UTC with milliseconds, its outcome and error text), the last success
-- and the failures since. All NULL (and 0 failures) until a run is recorded; the default of
-- consecutive_failures lets Java's INSERTs work; the text columns are utf8mb4 whatever the
-- table's default. Same columns as in MySqlLockProvider::ddl(). Restart the services after
-- running it (the provider checks the table's columns once).
ALTER TABLE shedlock ADD COLUMN last_run_fire TIMESTAMP(3) NULL DEFAULT NULL;
ALTER TABLE shedlock ADD COLUMN last_run_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
ALTER TABLE shedlock ADD COLUMN last_run_started TIMESTAMP(3) NULL DEFAULT NULL;
ALTER TABLE shedlock ADD COLUMN last_run_ended TIMESTAMP(3) NULL DEFAULT NULL;
ALTER TABLE shedlock ADD COLUMN last_run_outcome VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
ALTER TABLE shedlock ADD COLUMN last_run_error VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
ALTER TABLE shedlock ADD COLUMN last_success TIMESTAMP(3) NULL DEFAULT NULL;
ALTER TABLE shedlock ADD COLUMN consecutive_failures INT NOT NULL DEFAULT 0;
