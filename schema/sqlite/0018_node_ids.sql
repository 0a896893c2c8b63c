-- cdnca schema 18: node ids are never used twice. A node's history (incident impact and
-- applied times, drill applied times) keeps its id after the node is deleted; SQLite hands a
-- deleted highest rowid out again, so the next node took over that history. node_id_max is the
-- highest node id ever given out; store_node_create_locked gives the next one and raises it.
ALTER TABLE cdnca_meta ADD COLUMN node_id_max INTEGER NOT NULL DEFAULT 0;
UPDATE cdnca_meta SET node_id_max = (SELECT MAX(m) FROM (
  SELECT COALESCE(MAX(id), 0) AS m FROM nodes
  UNION ALL SELECT COALESCE(MAX(node_id), 0) FROM incident_applied
  UNION ALL SELECT COALESCE(MAX(node_id), 0) FROM incident_impact
  UNION ALL SELECT COALESCE(MAX(node_id), 0) FROM drill_applied
  UNION ALL SELECT COALESCE(MAX(node_id), 0) FROM probe_tasks)) WHERE id = 1;
