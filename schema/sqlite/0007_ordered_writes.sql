-- cdnca schema 7: the ordered-write lock row (docs/design.md#ordered-writes).
-- Every transaction that writes sites, origins, health, levels, publications, events, tokens,
-- webhooks or nodes first runs
--   UPDATE cdnca_meta SET gen = gen + 1 WHERE id = 1 RETURNING gen
-- (under SQLite's write lock, one more in-process statement; on PostgreSQL it serializes the
-- writers of every replica until commit). gen is the store generation.
CREATE TABLE cdnca_meta (
  id  INTEGER PRIMARY KEY CHECK (id = 1),
  gen INTEGER NOT NULL
);
INSERT INTO cdnca_meta (id, gen) VALUES (1, 0);
