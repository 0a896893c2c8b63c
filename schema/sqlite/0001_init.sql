-- cdnca schema 1: sites, hostnames, origins (with health state), nodes, tokens,
-- publications, probe evidence, events, webhooks and their outbox.
-- Times are Unix milliseconds (wall clock) unless named otherwise.

CREATE TABLE sites (
  id                    INTEGER PRIMARY KEY,
  name                  TEXT NOT NULL UNIQUE,
  failback              TEXT NOT NULL DEFAULT 'auto' CHECK (failback IN ('auto', 'manual')),
  failback_hold_ms      INTEGER NOT NULL DEFAULT 0,
  hc_enabled            INTEGER NOT NULL DEFAULT 0,
  hc_path               TEXT NOT NULL DEFAULT '/',
  hc_timeout_ms         INTEGER NOT NULL DEFAULT 5000,
  hc_unhealthy_after    INTEGER NOT NULL DEFAULT 3,
  hc_healthy_after      INTEGER NOT NULL DEFAULT 2,
  hc_checkpoints        INTEGER NOT NULL DEFAULT 0,
  nr_retries            INTEGER NOT NULL DEFAULT 2,
  nr_retry_budget_ms    INTEGER NOT NULL DEFAULT 15000,
  nr_fail_count         INTEGER NOT NULL DEFAULT 3,
  nr_fail_window_ms     INTEGER NOT NULL DEFAULT 10000,
  nr_skip_ms            INTEGER NOT NULL DEFAULT 30000,
  nr_half_open_requests INTEGER NOT NULL DEFAULT 1,
  nr_retry_on_status    TEXT NOT NULL DEFAULT '[502,503,504]',
  current_level         INTEGER NOT NULL DEFAULT 1,
  config_version        INTEGER NOT NULL DEFAULT 1,
  -- health engine bookkeeping
  last_probed_at        INTEGER,          -- NULL = never probed (probed first)
  next_probe_at         INTEGER,          -- NULL = due now
  all_unhealthy         INTEGER NOT NULL DEFAULT 0,  -- incident raised and not yet recovered
  failback_notified     INTEGER NOT NULL DEFAULT 0,  -- level for which failback_available was sent (0 = none)
  created_at            INTEGER NOT NULL,
  updated_at            INTEGER NOT NULL
);
CREATE INDEX sites_probe_order ON sites (hc_enabled, last_probed_at);

CREATE TABLE hostnames (
  hostname TEXT PRIMARY KEY,                  -- stored lowercased
  site_id  INTEGER NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
  position INTEGER NOT NULL
);
CREATE INDEX hostnames_site ON hostnames (site_id, position);

CREATE TABLE origins (
  id                 INTEGER PRIMARY KEY,
  site_id            INTEGER NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
  level              INTEGER NOT NULL CHECK (level BETWEEN 1 AND 16),
  address            TEXT NOT NULL,
  port               INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),
  scheme             TEXT NOT NULL CHECK (scheme IN ('http', 'https')),
  host_header        TEXT,
  weight             INTEGER NOT NULL DEFAULT 1,
  enabled            INTEGER NOT NULL DEFAULT 1,
  -- health state (origin state machine)
  health             TEXT NOT NULL DEFAULT 'unknown' CHECK (health IN ('unknown', 'healthy', 'unhealthy')),
  success_streak     INTEGER NOT NULL DEFAULT 0,
  failure_streak     INTEGER NOT NULL DEFAULT 0,
  health_changed_at  INTEGER,
  healthy_since      INTEGER,               -- set while healthy (failback hold)
  last_verdict       TEXT,                  -- 'success' | 'failure'
  last_source        TEXT,                  -- 'nodes' | 'checkpoints' | 'control'
  last_votes_success INTEGER NOT NULL DEFAULT 0,
  last_votes_failure INTEGER NOT NULL DEFAULT 0,
  last_checked_at    INTEGER,
  last_error         TEXT,
  created_at         INTEGER NOT NULL
);
CREATE INDEX origins_site ON origins (site_id, level, id);

CREATE TABLE nodes (
  id           INTEGER PRIMARY KEY,
  name         TEXT NOT NULL UNIQUE,
  created_at   INTEGER NOT NULL,
  last_seen_at INTEGER,
  config_seq   INTEGER NOT NULL DEFAULT 0,  -- last publication seq the node applied
  version      TEXT
);

-- Bearer tokens, stored only as SHA-256 hex. kind 'admin' or 'node'.
CREATE TABLE tokens (
  id         INTEGER PRIMARY KEY,
  kind       TEXT NOT NULL CHECK (kind IN ('admin', 'node')),
  hash       TEXT NOT NULL UNIQUE,
  node_id    INTEGER REFERENCES nodes (id) ON DELETE CASCADE,
  created_at INTEGER NOT NULL
);

-- Per-node, per-origin observations from visitor traffic (heartbeats).
CREATE TABLE node_observations (
  node_id    INTEGER NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
  site_id    INTEGER NOT NULL,
  origin_id  INTEGER NOT NULL,
  requests   INTEGER NOT NULL DEFAULT 0,
  failures   INTEGER NOT NULL DEFAULT 0,
  skipped    INTEGER NOT NULL DEFAULT 0,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (node_id, origin_id)
);
CREATE INDEX node_observations_origin ON node_observations (origin_id);

-- Every republication of a site (or its deletion: deleted = 1) gets a seq.
CREATE TABLE publications (
  seq            INTEGER PRIMARY KEY AUTOINCREMENT,
  site_id        INTEGER NOT NULL,
  config_version INTEGER NOT NULL,
  deleted        INTEGER NOT NULL DEFAULT 0,
  reason         TEXT NOT NULL,
  created_at     INTEGER NOT NULL
);
CREATE INDEX publications_site ON publications (site_id, seq);

-- Probe rounds and the per-origin evidence behind each verdict.
CREATE TABLE probe_rounds (
  id          INTEGER PRIMARY KEY,
  started_at  INTEGER NOT NULL,
  finished_at INTEGER,
  sites       INTEGER NOT NULL DEFAULT 0,
  origins     INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE verdicts (
  id          INTEGER PRIMARY KEY,
  round_id    INTEGER NOT NULL,
  site_id     INTEGER NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
  origin_id   INTEGER NOT NULL REFERENCES origins (id) ON DELETE CASCADE,
  round_at    INTEGER NOT NULL,
  source      TEXT,                        -- NULL when no source reached a verdict
  verdict     TEXT,                        -- 'success' | 'failure' | NULL
  state_after TEXT NOT NULL,
  votes       TEXT NOT NULL DEFAULT '[]'   -- JSON array of individual votes
);
CREATE INDEX verdicts_origin ON verdicts (origin_id, id);

-- Events: site messages and the notification center.
CREATE TABLE events (
  id         INTEGER PRIMARY KEY,
  site_id    INTEGER,                      -- kept after the site is deleted
  site_name  TEXT,
  type       TEXT NOT NULL,
  title      TEXT NOT NULL,
  data       TEXT NOT NULL DEFAULT '{}',
  created_at INTEGER NOT NULL
);
CREATE INDEX events_site ON events (site_id, id);

CREATE TABLE webhooks (
  id         INTEGER PRIMARY KEY,
  url        TEXT NOT NULL,
  secret     TEXT NOT NULL,
  events     TEXT,                         -- JSON array of event types; NULL = all
  created_at INTEGER NOT NULL
);

-- Durable outbox: one row per (webhook, event), written with the event.
CREATE TABLE deliveries (
  id              INTEGER PRIMARY KEY,
  webhook_id      INTEGER NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
  event_id        INTEGER NOT NULL REFERENCES events (id) ON DELETE CASCADE,
  uuid            TEXT NOT NULL UNIQUE,
  site_id         INTEGER,
  state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  last_status     INTEGER,
  last_error      TEXT,
  created_at      INTEGER NOT NULL,
  delivered_at    INTEGER
);
CREATE INDEX deliveries_pending ON deliveries (state, next_attempt_at);
CREATE INDEX deliveries_webhook ON deliveries (webhook_id, id);
