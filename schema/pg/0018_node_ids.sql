-- cdnca schema 18: node ids are never used twice (see schema/sqlite/0018_node_ids.sql). An
-- identity column never gives an id out twice either, but both dialects take the next id from
-- node_id_max, so one statement serves both.
ALTER TABLE cdnca_meta ADD COLUMN node_id_max BIGINT NOT NULL DEFAULT 0;
UPDATE cdnca_meta SET node_id_max = (SELECT MAX(m) FROM (
  SELECT COALESCE(MAX(id), 0) AS m FROM nodes
  UNION ALL SELECT COALESCE(MAX(node_id), 0) FROM incident_applied
  UNION ALL SELECT COALESCE(MAX(node_id), 0) FROM incident_impact
  UNION ALL SELECT COALESCE(MAX(node_id), 0) FROM drill_applied
  UNION ALL SELECT COALESCE(MAX(node_id), 0) FROM probe_tasks) AS ids) WHERE id = 1;
