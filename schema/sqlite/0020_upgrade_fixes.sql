-- cdnca schema 20: two things found by upgrading databases of older releases (see
-- schema/pg/0020_upgrade_fixes.sql). Node ids given out before schema 18: SQLite had no
-- sequence to read (before 18 it gave a deleted highest id out again anyway), so there is
-- nothing to recover here.
--
-- An event in a kept incident's timeline is not pruned (its deliveries are the incident's
-- evidence): the event prune asks this for each old event.
CREATE INDEX incident_entries_event ON incident_entries (event_id);

-- Site and origin ids are never used twice either (as node ids since 0018). A site's or origin's
-- history (incidents, events, publications, drills, verdict evidence) keeps its id after it is
-- deleted, and SQLite hands a deleted highest rowid out again: the next site took over the
-- deleted one's incident, messages and publications. The highest id deleted is kept here (by
-- the triggers); the store gives the next id past it and past every live row. On a database
-- before this one, the highest ids its history still names are what is known (an origin's
-- health change is named only in its event's data).
ALTER TABLE cdnca_meta ADD COLUMN site_id_max INTEGER NOT NULL DEFAULT 0;
ALTER TABLE cdnca_meta ADD COLUMN origin_id_max INTEGER NOT NULL DEFAULT 0;
UPDATE cdnca_meta SET site_id_max = (SELECT MAX(m) FROM (
  SELECT COALESCE(MAX(id), 0) AS m FROM sites
  UNION ALL SELECT COALESCE(MAX(site_id), 0) FROM incidents
  UNION ALL SELECT COALESCE(MAX(site_id), 0) FROM events
  UNION ALL SELECT COALESCE(MAX(site_id), 0) FROM publications
  UNION ALL SELECT COALESCE(MAX(site_id), 0) FROM drills)),
  origin_id_max = (SELECT MAX(m) FROM (
  SELECT COALESCE(MAX(id), 0) AS m FROM origins
  UNION ALL SELECT COALESCE(MAX(origin_id), 0) FROM incident_origins
  UNION ALL SELECT COALESCE(MAX(origin_id), 0) FROM incident_impact
  UNION ALL SELECT COALESCE(MAX(origin_id), 0) FROM drill_origins
  UNION ALL SELECT COALESCE(MAX(origin_id), 0) FROM probe_tasks
  UNION ALL SELECT COALESCE(MAX(CAST(json_extract(data, '$.origin_id') AS INTEGER)), 0)
    FROM events WHERE json_valid(data)
  UNION ALL SELECT COALESCE(MAX(CAST(json_extract(data, '$.origin_id') AS INTEGER)), 0)
    FROM incident_entries WHERE json_valid(data))) WHERE id = 1;
CREATE TRIGGER sites_id_kept AFTER DELETE ON sites BEGIN
  UPDATE cdnca_meta SET site_id_max = MAX(site_id_max, OLD.id) WHERE id = 1;
END;
CREATE TRIGGER origins_id_kept AFTER DELETE ON origins BEGIN
  UPDATE cdnca_meta SET origin_id_max = MAX(origin_id_max, OLD.id) WHERE id = 1;
END;
