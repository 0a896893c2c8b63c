-- cdnca schema 8: the engine lease (docs/design.md#engine-lease).
-- One row per lease ('engine'): the replica holding it runs probe rounds, switching, webhook
-- delivery and pruning. epoch is the fencing number, bumped at every change of holder;
-- expires_at is in ms since the epoch by the database clock (written only in cluster mode on
-- PostgreSQL; with SQLite the one process is always the engine and the table stays empty).
CREATE TABLE leases (
  name       TEXT PRIMARY KEY,
  holder     TEXT NOT NULL,
  epoch      INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
