-- cdnca schema 10: the probe-round writes as on PostgreSQL (see schema/pg/0010): the unused
-- sites_probe_order index goes, and verdicts keep no foreign keys (the store deletes an origin's
-- or a site's verdicts itself before it deletes the origin or the site). SQLite cannot drop a
-- foreign key, so verdicts is rebuilt with the same columns and rows.
DROP INDEX sites_probe_order;
CREATE TABLE verdicts_next (
  id          INTEGER PRIMARY KEY,
  round_id    INTEGER NOT NULL,
  site_id     INTEGER NOT NULL,
  origin_id   INTEGER NOT NULL,
  round_at    INTEGER NOT NULL,
  source      TEXT,                        -- NULL when no source reached a verdict
  verdict     TEXT,                        -- 'success' | 'failure' | NULL
  state_after TEXT NOT NULL,
  votes       TEXT NOT NULL DEFAULT '[]'   -- JSON array of individual votes
);
INSERT INTO verdicts_next (id, round_id, site_id, origin_id, round_at, source, verdict,
                           state_after, votes)
  SELECT id, round_id, site_id, origin_id, round_at, source, verdict, state_after, votes
  FROM verdicts;
DROP TABLE verdicts;
ALTER TABLE verdicts_next RENAME TO verdicts;
CREATE INDEX verdicts_origin ON verdicts (origin_id, id);
