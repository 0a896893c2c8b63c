-- cdnca schema 19: events by time, and by type and time (see schema/sqlite/0019_event_retention.sql).
CREATE INDEX events_created ON events (created_at);
CREATE INDEX events_type ON events (type, created_at);
