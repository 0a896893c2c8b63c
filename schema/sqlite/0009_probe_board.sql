-- cdnca schema 9: the probe task board in tables (docs/design.md#probe-tasks-and-votes), used in
-- cluster mode so a node may poll tasks and post votes on any replica. With SQLite (one process)
-- the board stays in memory and these tables stay empty.
-- probe_round_open: one row per round the engine handed to nodes. epoch is the engine lease's
-- fencing epoch of the leader that opened it; deadline_at is ms since the epoch by the database
-- clock. A vote is taken only while state = 'open' and the database clock is before deadline_at;
-- the leader closes the round ('closed'), a new leader aborts the older epochs' open ones
-- ('aborted').
CREATE TABLE probe_round_open (
  round_id    INTEGER PRIMARY KEY,
  epoch       INTEGER NOT NULL,
  deadline_at INTEGER NOT NULL,
  state       TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed', 'aborted'))
);
-- probe_tasks: what each node is asked in a round (task_id unique within the round); check_opts
-- is the site's health-check options as the JSON object GET /v1/node/tasks sends as "check".
CREATE TABLE probe_tasks (
  round_id   INTEGER NOT NULL,
  node_id    INTEGER NOT NULL,
  task_id    INTEGER NOT NULL,
  origin_id  INTEGER NOT NULL,
  url        TEXT NOT NULL,
  host       TEXT NOT NULL,
  timeout_ms INTEGER NOT NULL,
  check_opts TEXT NOT NULL DEFAULT '{}',
  delivered  INTEGER NOT NULL DEFAULT 0 CHECK (delivered IN (0, 1)),
  PRIMARY KEY (round_id, node_id, task_id)
);
-- probe_votes: the answers received in time, one per task (a repeat is ignored).
CREATE TABLE probe_votes (
  round_id   INTEGER NOT NULL,
  node_id    INTEGER NOT NULL,
  task_id    INTEGER NOT NULL,
  ok         INTEGER NOT NULL CHECK (ok IN (0, 1)),
  status     INTEGER NOT NULL DEFAULT 0,
  error      TEXT NOT NULL DEFAULT '',
  latency_ms INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (round_id, node_id, task_id)
);
