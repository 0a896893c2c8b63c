-- cdnca schema 5: per-site health-check options (docs/design.md#health-check-options).
-- hc_options holds the options that differ from the defaults as one JSON object (type, method,
-- headers, expected_codes, expected_body, port, interval_ms, level_min_healthy); NULL = every
-- default, which is the seed's rule exactly.
ALTER TABLE sites ADD COLUMN hc_options TEXT;
-- The site's own probe interval (health_check.interval_ms, also inside hc_options), as a column
-- so the prober finds the next site due without reading every site's options. NULL = the
-- global probe_interval_ms.
ALTER TABLE sites ADD COLUMN hc_interval_ms INTEGER;
CREATE INDEX sites_own_interval ON sites (hc_interval_ms) WHERE hc_interval_ms IS NOT NULL;
