-- cdnca schema 4: an API a team can share — fleet state flags, tokens with roles, the audit log.

-- Fleet view (docs/design.md#fleet-view): each site's state as flags, rewritten by the health engine
-- in the transaction that changes the level or the health it is computed from, so the summary
-- and the state= filters are indexed counts and scans (no per-site status rendering).
--   state_on_backup           the current level is not the first level with an enabled origin
--   state_all_down            health checks active and every non-empty level unhealthy
--   state_failback_available  an earlier level qualifies for failback (the card's flag)
--   state_paused              health checks on but fewer than two enabled origins
ALTER TABLE sites ADD COLUMN state_on_backup INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sites ADD COLUMN state_all_down INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sites ADD COLUMN state_failback_available INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sites ADD COLUMN state_paused INTEGER NOT NULL DEFAULT 0;

-- Sites stored before this migration: the flags as far as SQL can tell; the engine's next
-- evaluation of a site (every probe round for the active ones) writes the exact values.
UPDATE sites SET
  state_paused = (hc_enabled = 1 AND
                  (SELECT COUNT(*) FROM origins o WHERE o.site_id = sites.id AND o.enabled = 1) < 2),
  state_on_backup = COALESCE(current_level <> (SELECT MIN(o.level) FROM origins o
                                               WHERE o.site_id = sites.id AND o.enabled = 1), 0),
  state_all_down = (all_unhealthy <> 0),
  state_failback_available = (failback_notified <> 0);
UPDATE sites SET state_all_down = 0 WHERE state_paused = 1 OR hc_enabled = 0;

-- Few sites are in each state at a time: partial indexes keep counts and filtered pages cheap.
CREATE INDEX sites_state_on_backup ON sites (id) WHERE state_on_backup = 1;
CREATE INDEX sites_state_all_down ON sites (id) WHERE state_all_down = 1;
CREATE INDEX sites_state_failback ON sites (id) WHERE state_failback_available = 1;
CREATE INDEX sites_state_paused ON sites (id) WHERE state_paused = 1;

-- Tokens with roles (docs/design.md#tokens-and-roles). kind 'admin' rows are API tokens: a name,
-- a role and an optional expiry; node tokens keep NULLs. The token named 'bootstrap' is the one
-- CDNCA_ADMIN_TOKEN enrols at start (it replaces only the earlier bootstrap token).
ALTER TABLE tokens ADD COLUMN name TEXT;
ALTER TABLE tokens ADD COLUMN role TEXT CHECK (role IS NULL OR role IN ('admin', 'operator', 'read'));
ALTER TABLE tokens ADD COLUMN expires_at INTEGER;  -- NULL = never
-- the newest admin token is the enrolled one; any older row (none is expected) keeps a unique name
UPDATE tokens SET role = 'admin',
  name = CASE WHEN id = (SELECT MAX(id) FROM tokens WHERE kind = 'admin') THEN 'bootstrap'
              ELSE 'bootstrap-' || id END
  WHERE kind = 'admin';
CREATE UNIQUE INDEX tokens_api_name ON tokens (name) WHERE kind = 'admin';

-- Audit log (docs/design.md#audit): one row per accepted /v1 write, in the write's transaction.
-- token_id is not a foreign key: the record outlives a revoked token.
CREATE TABLE audit (
  id         INTEGER PRIMARY KEY,
  at         INTEGER NOT NULL,
  token_id   INTEGER,
  token_name TEXT,
  method     TEXT NOT NULL,
  path       TEXT NOT NULL,
  site_id    INTEGER,
  status     INTEGER NOT NULL,
  summary    TEXT NOT NULL
);
CREATE INDEX audit_site ON audit (site_id, id);
CREATE INDEX audit_at ON audit (at);
