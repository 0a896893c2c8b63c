-- cdnca schema 19: events and publications by time (see schema/sqlite/0019_retention.sql).
CREATE INDEX events_created ON events (created_at);
CREATE INDEX events_type ON events (type, created_at);
CREATE INDEX publications_created ON publications (created_at);
