-- cdnca schema 19: what is kept for a time is pruned by age on the engine (controld/retain.c):
-- events (--event-retention-days), test events with their deliveries, and publications (each
-- site's newest kept); an operator's tests are counted over the last minute. Each is read by
-- time: events by time alone and by type and time, publications by time.
CREATE INDEX events_created ON events (created_at);
CREATE INDEX events_type ON events (type, created_at);
CREATE INDEX publications_created ON publications (created_at);
