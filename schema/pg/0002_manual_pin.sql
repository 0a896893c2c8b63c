-- cdnca schema 2 (PostgreSQL): a level chosen by the operator is kept.
-- manual_pin = 1 after a manual switch to a level with an earlier non-empty level: automatic
-- failback is suspended (the site behaves as failback "manual": a notice, no switch back) until
-- the operator switches again or an automatic failover moves the site.
ALTER TABLE sites ADD COLUMN manual_pin BIGINT NOT NULL DEFAULT 0;
