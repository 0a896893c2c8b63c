-- cdnca schema 6: node_retry.backup_levels (the node goes on to the following levels when the
-- current one is spent), failure_ratio (NULL = off) and failure_min_volume.
ALTER TABLE sites ADD COLUMN nr_backup_levels INTEGER NOT NULL DEFAULT 1;
ALTER TABLE sites ADD COLUMN nr_failure_ratio REAL;
ALTER TABLE sites ADD COLUMN nr_failure_min_volume INTEGER NOT NULL DEFAULT 20;
