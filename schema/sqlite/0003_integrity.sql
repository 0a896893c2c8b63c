-- cdnca schema 3: safe concurrent edits (docs/design.md#rest-api).
-- revision: goes up on every change to a site's configuration or its origins (API writes);
-- GET /v1/sites/{id} answers it as the ETag, and If-Match on writes compares against it.
ALTER TABLE sites ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;

-- The first answer to a POST carrying an Idempotency-Key, replayed when the same key comes back
-- with the same request (method, path and body, hashed); kept 24 hours, pruned on every insert.
CREATE TABLE idempotency_keys (
  key          TEXT PRIMARY KEY,
  request_hash TEXT NOT NULL,      -- hex SHA-256 of method, path and body
  status       INTEGER NOT NULL,
  body         TEXT,               -- the answer's JSON text (NULL = no body)
  etag         TEXT,               -- the answer's ETag header, if any
  created_at   INTEGER NOT NULL
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
