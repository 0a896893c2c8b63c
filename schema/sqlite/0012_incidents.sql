-- cdnca schema 12: incidents, one record per outage (docs/design.md#incidents). An incident
-- keeps its site's id and name after the site is deleted (no foreign key), as events do; its
-- timeline, failed origins, per-node propagation and visitor impact go with it (the store
-- deletes them with the incident when the retention prunes it).
CREATE TABLE incidents (
  id               INTEGER PRIMARY KEY,
  site_id          INTEGER NOT NULL,
  site_name        TEXT NOT NULL,
  state            TEXT NOT NULL CHECK (state IN ('open', 'mitigated', 'resolved')),
  trigger          TEXT NOT NULL,
  opened_at        INTEGER NOT NULL,
  mitigated_at     INTEGER,
  resolved_at      INTEGER,
  clear_since      INTEGER,
  opened_level     INTEGER NOT NULL,
  levels_served    TEXT NOT NULL DEFAULT '',
  reopened         INTEGER NOT NULL DEFAULT 0,
  first_failure_at INTEGER,
  switched_at      INTEGER,
  switch_seq       INTEGER NOT NULL DEFAULT 0,
  resolved_by      TEXT,
  entries          INTEGER NOT NULL DEFAULT 0,
  dropped          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX incidents_site ON incidents (site_id, id);
CREATE INDEX incidents_active ON incidents (id) WHERE state <> 'resolved';
CREATE INDEX incidents_resolved_at ON incidents (resolved_at);

-- The timeline: every event of the site while the incident was active (with the votes behind a
-- state change), and the operators' notes; at most 10,000 per incident (incidents.dropped).
CREATE TABLE incident_entries (
  id          INTEGER PRIMARY KEY,
  incident_id INTEGER NOT NULL,
  at          INTEGER NOT NULL,
  kind        TEXT NOT NULL,
  event_id    INTEGER,
  type        TEXT NOT NULL,
  title       TEXT NOT NULL,
  data        TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX incident_entries_incident ON incident_entries (incident_id, id);

-- The origins that turned unhealthy while the incident was active.
CREATE TABLE incident_origins (
  incident_id INTEGER NOT NULL,
  origin_id   INTEGER NOT NULL,
  level       INTEGER NOT NULL,
  failed_at   INTEGER NOT NULL,
  PRIMARY KEY (incident_id, origin_id)
);

-- When each node first asked for the config after a switch's publication (seq).
CREATE TABLE incident_applied (
  incident_id INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  node_id     INTEGER NOT NULL,
  node_name   TEXT NOT NULL,
  applied_at  INTEGER NOT NULL,
  PRIMARY KEY (incident_id, seq, node_id)
);

-- Visitor traffic as nodes reported it while the incident was active (heartbeat deltas).
CREATE TABLE incident_impact (
  incident_id      INTEGER NOT NULL,
  node_id          INTEGER NOT NULL,
  origin_id        INTEGER NOT NULL,
  requests         INTEGER NOT NULL DEFAULT 0,
  failures         INTEGER NOT NULL DEFAULT 0,
  backup_picks     INTEGER NOT NULL DEFAULT 0,
  fail_open        INTEGER NOT NULL DEFAULT 0,
  first_failure_at INTEGER,
  last_failure_at  INTEGER,
  PRIMARY KEY (incident_id, node_id, origin_id)
);

-- Heartbeat observations carry the backup-level picks and fail-opens too (counters since the
-- node started, as requests and failures are).
ALTER TABLE node_observations ADD COLUMN backup_picks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE node_observations ADD COLUMN fail_open INTEGER NOT NULL DEFAULT 0;

-- An incident's page lists the webhook deliveries of its events.
CREATE INDEX deliveries_event ON deliveries (event_id);
