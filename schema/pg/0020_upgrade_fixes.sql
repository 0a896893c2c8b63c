-- cdnca schema 20: two things found by upgrading databases of older releases.
--
-- Node ids given out before schema 18 count too. Before 18 PostgreSQL took a node's id from the
-- identity sequence, which never gives an id out twice; 0018 set node_id_max from the ids still
-- in use, so a deleted highest id was given out again after the upgrade. node_id_max is raised
-- to the sequence's last value (NULL: it never gave one out).
UPDATE cdnca_meta SET node_id_max = GREATEST(node_id_max, COALESCE(
  pg_sequence_last_value(pg_get_serial_sequence('nodes', 'id')::regclass), 0)) WHERE id = 1;
-- An event in a kept incident's timeline is not pruned (its deliveries are the incident's
-- evidence): the event prune asks this for each old event.
CREATE INDEX incident_entries_event ON incident_entries (event_id);
-- Site and origin ids (see schema/sqlite/0020_upgrade_fixes.sql): SQLite keeps the highest
-- deleted id in these columns; PostgreSQL's identities never give an id out twice, so here
-- they stay 0 (the same columns in both dialects).
ALTER TABLE cdnca_meta ADD COLUMN site_id_max BIGINT NOT NULL DEFAULT 0;
ALTER TABLE cdnca_meta ADD COLUMN origin_id_max BIGINT NOT NULL DEFAULT 0;
