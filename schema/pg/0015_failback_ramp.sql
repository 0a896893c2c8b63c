-- cdnca schema 15: the failback ramp (docs/design.md#failback-ramp). failback_ramp is the site's
-- policy as one JSON object ({"steps", "step_ms", "max_failure_ratio", "min_requests"}; NULL =
-- a failback switches at once).
ALTER TABLE sites ADD COLUMN failback_ramp TEXT;
-- A running ramp (the engine's): ramp is the published run as one JSON object ({"from_level",
-- "to_level", "started_at", "steps", "step_ms"}; NULL = none) and ramp_to_level its level, for the
-- heartbeats' count of that level's requests and failures since the ramp's last window
-- (ramp_requests, ramp_failures). ramp_hold_until: after an abort, no failback before this time.
ALTER TABLE sites ADD COLUMN ramp TEXT;
ALTER TABLE sites ADD COLUMN ramp_to_level BIGINT;
ALTER TABLE sites ADD COLUMN ramp_requests BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sites ADD COLUMN ramp_failures BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sites ADD COLUMN ramp_hold_until BIGINT NOT NULL DEFAULT 0;
CREATE INDEX sites_ramping ON sites (ramp_to_level) WHERE ramp_to_level IS NOT NULL;
