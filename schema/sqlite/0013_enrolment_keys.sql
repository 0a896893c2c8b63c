-- cdnca schema 13: enrolment keys (docs/design.md#enrolment-keys). One key enrols many nodes:
-- POST /v1/node/enrol presents it and gets a node token. The secret is stored only as its
-- SHA-256 hex, like tokens. A revoked key keeps its row (its uses stay on record), so its name
-- stays taken.
CREATE TABLE enrolment_keys (
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL UNIQUE,
  hash       TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  expires_at INTEGER,                                             -- NULL = never
  max_uses   INTEGER CHECK (max_uses IS NULL OR max_uses > 0),   -- NULL = unlimited
  uses       INTEGER NOT NULL DEFAULT 0 CHECK (uses >= 0 AND (max_uses IS NULL OR uses <= max_uses)),
  revoked_at INTEGER                                              -- NULL = live
);
