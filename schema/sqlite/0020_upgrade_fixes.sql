-- cdnca schema 20: two things found by upgrading databases of older releases (see
-- schema/pg/0020_upgrade_fixes.sql). Node ids given out before schema 18: SQLite had no
-- sequence to read (before 18 it gave a deleted highest id out again anyway), so there is
-- nothing to recover here.
--
-- An event in a kept incident's timeline is not pruned (its deliveries are the incident's
-- evidence): the event prune asks this for each old event.
CREATE INDEX incident_entries_event ON incident_entries (event_id);
