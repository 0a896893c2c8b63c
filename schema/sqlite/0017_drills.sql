-- cdnca schema 17: failover drills (docs/design.md#drills). A drill keeps its site's id after the
-- site is deleted (no foreign key), as incidents do; the engine cancels a live one whose site is
-- gone. state: scheduled (waits for start_at), running (switched to to_level), finished (result).
-- window_requests/window_failures: the target level's visitor requests and failures the nodes
-- reported since the drill's last window (min_requests), as the failback ramp's window.
CREATE TABLE drills (
  id                INTEGER PRIMARY KEY,
  site_id           INTEGER NOT NULL,
  from_level        INTEGER NOT NULL DEFAULT 1,
  to_level          INTEGER NOT NULL,
  duration_ms       INTEGER NOT NULL,
  max_failure_ratio REAL NOT NULL,
  min_requests      INTEGER NOT NULL,
  start_at          INTEGER NOT NULL,
  every_ms          INTEGER,
  state             TEXT NOT NULL CHECK (state IN ('scheduled', 'running', 'finished')),
  result            TEXT CHECK (result IN ('passed', 'failed', 'aborted', 'cancelled')),
  why               TEXT,
  created_by        TEXT,
  created_at        INTEGER,
  started_at        INTEGER,
  finished_at       INTEGER,
  requests          INTEGER NOT NULL DEFAULT 0,
  failures          INTEGER NOT NULL DEFAULT 0,
  window_requests   INTEGER NOT NULL DEFAULT 0,
  window_failures   INTEGER NOT NULL DEFAULT 0,
  next_id           INTEGER
);
CREATE INDEX drills_site ON drills (site_id, id);
CREATE INDEX drills_live ON drills (id) WHERE state <> 'finished';

-- The target level's figures per origin: visitor requests and failures and the latency sum and
-- count the nodes reported (heartbeat deltas) while the drill ran.
CREATE TABLE drill_origins (
  drill_id       INTEGER NOT NULL,
  origin_id      INTEGER NOT NULL,
  requests       INTEGER NOT NULL DEFAULT 0,
  failures       INTEGER NOT NULL DEFAULT 0,
  latency_sum_ms INTEGER NOT NULL DEFAULT 0,
  latency_count  INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (drill_id, origin_id)
);

-- When each node first held each of the drill's switches (its publications with reason 'drill':
-- the switch, then the switch back).
CREATE TABLE drill_applied (
  drill_id   INTEGER NOT NULL,
  seq        INTEGER NOT NULL,
  node_id    INTEGER NOT NULL,
  node_name  TEXT NOT NULL,
  applied_at INTEGER NOT NULL,
  PRIMARY KEY (drill_id, seq, node_id)
);

-- The site's running drill (the engine's): while set, the engine leaves the level to the drill.
ALTER TABLE sites ADD COLUMN drill_id INTEGER;

-- A node's latency sum and count of an origin's answers since it started (heartbeats; 0 from
-- older nodes): the drills' latency per origin comes from their growth.
ALTER TABLE node_observations ADD COLUMN latency_sum_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE node_observations ADD COLUMN latency_count INTEGER NOT NULL DEFAULT 0;
