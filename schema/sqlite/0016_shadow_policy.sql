-- cdnca schema 16: shadow health policies (docs/design.md, Shadow health policies). A site's
-- health_check_shadow (NULL = none) is probed by controld alone; its verdicts run the origin and
-- level machines into the shadow state below, which publishes, switches and opens nothing.
ALTER TABLE sites ADD COLUMN health_check_shadow TEXT;

-- The shadow level machine of a site and its comparison counters (since = when it started).
CREATE TABLE shadow_sites (
  site_id           INTEGER PRIMARY KEY REFERENCES sites (id) ON DELETE CASCADE,
  current_level     INTEGER NOT NULL CHECK (current_level BETWEEN 1 AND 16),
  all_unhealthy     INTEGER NOT NULL DEFAULT 0,
  failback_notified INTEGER NOT NULL DEFAULT 0,
  rounds            INTEGER NOT NULL DEFAULT 0,
  skipped           INTEGER NOT NULL DEFAULT 0,
  since             INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL
);

-- The shadow origin machine of each origin, and its verdicts compared with the real ones.
CREATE TABLE shadow_origins (
  origin_id         INTEGER PRIMARY KEY REFERENCES origins (id) ON DELETE CASCADE,
  site_id           INTEGER NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
  health            TEXT NOT NULL DEFAULT 'unknown',
  success_streak    INTEGER NOT NULL DEFAULT 0,
  failure_streak    INTEGER NOT NULL DEFAULT 0,
  health_changed_at INTEGER NOT NULL DEFAULT 0,
  healthy_since     INTEGER NOT NULL DEFAULT 0,
  last_verdict      TEXT,
  last_real         TEXT,
  last_error        TEXT NOT NULL DEFAULT '',
  compared          INTEGER NOT NULL DEFAULT 0,
  disagreements     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX shadow_origins_site ON shadow_origins (site_id);

-- The switches the shadow policy would have made (the newest 100 per site are kept).
CREATE TABLE shadow_switches (
  id         INTEGER PRIMARY KEY,
  site_id    INTEGER NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
  at         INTEGER NOT NULL,
  from_level INTEGER NOT NULL,
  to_level   INTEGER NOT NULL,
  reason     TEXT NOT NULL,
  why        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX shadow_switches_site ON shadow_switches (site_id, id);
