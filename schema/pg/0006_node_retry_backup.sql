-- cdnca schema 6 (PostgreSQL): node_retry.backup_levels (the node goes on to the following levels
-- when the current one is spent), failure_ratio (NULL = off) and failure_min_volume.
-- SQLite's REAL is an 8-byte float: DOUBLE PRECISION here (PostgreSQL REAL is 4 bytes).
ALTER TABLE sites ADD COLUMN nr_backup_levels BIGINT NOT NULL DEFAULT 1;
ALTER TABLE sites ADD COLUMN nr_failure_ratio DOUBLE PRECISION;
ALTER TABLE sites ADD COLUMN nr_failure_min_volume BIGINT NOT NULL DEFAULT 20;
