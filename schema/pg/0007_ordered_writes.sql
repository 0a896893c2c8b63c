-- cdnca schema 7 (PostgreSQL): the ordered-write lock row (docs/design.md#ordered-writes).
-- Every transaction that writes sites, origins, health, levels, publications, events, tokens,
-- webhooks or nodes first runs
--   UPDATE cdnca_meta SET gen = gen + 1 WHERE id = 1 RETURNING gen
-- so those writers are serialized across replicas until commit: publication seq and event ids
-- are numbered and committed in one order. gen is the cluster-wide store generation.
CREATE TABLE cdnca_meta (
  id  BIGINT PRIMARY KEY CHECK (id = 1),
  gen BIGINT NOT NULL
);
INSERT INTO cdnca_meta (id, gen) VALUES (1, 0);
