-- cdnca schema 8 (PostgreSQL): the engine lease (docs/design.md#engine-lease).
-- One row per lease ('engine'): the replica holding it runs probe rounds, switching, webhook
-- delivery and pruning. epoch is the fencing number, bumped at every change of holder;
-- expires_at is in ms since the epoch by the database clock
-- ((extract(epoch from clock_timestamp()) * 1000)::bigint), never by a replica's clock.
CREATE TABLE leases (
  name       TEXT PRIMARY KEY,
  holder     TEXT NOT NULL,
  epoch      BIGINT NOT NULL,
  expires_at BIGINT NOT NULL
);
