-- cdnca schema 15: the failback ramp (docs/design.md#failback-ramp). failback_ramp is the site's
-- policy as one JSON object ({"steps", "step_ms", "max_failure_ratio", "min_requests"}; NULL =
-- a failback switches at once).
ALTER TABLE sites ADD COLUMN failback_ramp TEXT;
