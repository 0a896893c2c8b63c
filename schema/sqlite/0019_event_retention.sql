-- cdnca schema 19: events are pruned by age (--event-retention-days), and test events
-- (webhook.test) with their deliveries; an operator's tests are counted over the last minute.
-- Both read events by time: by time alone, and by type and time.
CREATE INDEX events_created ON events (created_at);
CREATE INDEX events_type ON events (type, created_at);
