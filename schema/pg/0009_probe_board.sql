-- cdnca schema 9 (PostgreSQL): the probe task board in tables (docs/design.md#probe-tasks-and-votes),
-- so a node may poll tasks and post votes on any replica of the cluster.
-- probe_round_open: one row per round the engine handed to nodes. epoch is the engine lease's
-- fencing epoch of the leader that opened it; deadline_at is ms since the epoch by the database
-- clock. A vote is taken only while state = 'open' and the database clock is before deadline_at;
-- the leader closes the round ('closed'), a new leader aborts the older epochs' open ones
-- ('aborted').
CREATE TABLE probe_round_open (
  round_id    BIGINT PRIMARY KEY,
  epoch       BIGINT NOT NULL,
  deadline_at BIGINT NOT NULL,
  state       TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed', 'aborted'))
);
-- probe_tasks: what each node is asked in a round (task_id unique within the round); check_opts
-- is the site's health-check options as the JSON object GET /v1/node/tasks sends as "check".
CREATE TABLE probe_tasks (
  round_id   BIGINT NOT NULL,
  node_id    BIGINT NOT NULL,
  task_id    BIGINT NOT NULL,
  origin_id  BIGINT NOT NULL,
  url        TEXT NOT NULL,
  host       TEXT NOT NULL,
  timeout_ms BIGINT NOT NULL,
  check_opts TEXT NOT NULL DEFAULT '{}',
  delivered  BIGINT NOT NULL DEFAULT 0 CHECK (delivered IN (0, 1)),
  PRIMARY KEY (round_id, node_id, task_id)
);
-- probe_votes: the answers received in time, one per task (a repeat is ignored).
CREATE TABLE probe_votes (
  round_id   BIGINT NOT NULL,
  node_id    BIGINT NOT NULL,
  task_id    BIGINT NOT NULL,
  ok         BIGINT NOT NULL CHECK (ok IN (0, 1)),
  status     BIGINT NOT NULL DEFAULT 0,
  error      TEXT NOT NULL DEFAULT '',
  latency_ms BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (round_id, node_id, task_id)
);
