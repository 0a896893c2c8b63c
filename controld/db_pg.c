/* db_pg — the PostgreSQL driver behind db.h, on libpq.

   Statements are prepared server-side once per connection (PQprepare, parameter types left to
   the server, names "s1", "s2", …) and cached by the SQL text's address. db_step executes on its
   first call (PQexecPrepared, text parameters and results) and then walks the PGresult's rows,
   so a statement's rows stay readable while other statements run (nested loops work as on
   SQLite).

   Round trips are saved with libpq's pipeline mode: BEGIN is not sent on its own but queued, as
   are statements run with db_defer; the queue goes out with the next statement whose answer is
   needed (db_step, COMMIT, …), all in one round trip, and their results are read in order before
   that answer. A queued statement that fails fails the one sent with it (and the transaction). A
   lost connection is marked down and re-established lazily by the next db_prep, db_exec or
   db_begin_* with backoff; the server-side statements are then prepared again and db_epoch is
   bumped. A statement sent with db_prefetch is queued the same way but keeps its result: the
   queue goes out with the next answer needed (or with that statement's own first db_step), and
   its result waits on the statement for its db_step. */
#include "clock.h"
#include "db.h"
#include "db_driver.h"
#include "log.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Statement cache buckets: the store has about 70 statements; a few per bucket at most. */
#define PG_BUCKETS 128
/* Reconnect backoff: the first attempt at once, then 100 ms doubling to 5 s between attempts,
   so a restarted server is found within seconds and a dead one is not hammered. */
#define PG_BACKOFF_MIN_MS 100
#define PG_BACKOFF_MAX_MS 5000
/* pg_advisory_xact_lock key of migrations: "cdnc" in ASCII, so it is recognisable in pg_locks. */
#define PG_MIGRATE_LOCK_KEY "1667526243"

struct pg_stmt {
  struct db_stmt base;
  const char *key; /* the SQL text's address (cache key) */
  char *sql;       /* the text with $N placeholders */
  char name[16];
  uint64_t prepared_epoch; /* the connection epoch it was prepared in; 0 = never */
  int nparams;
  char **vals;   /* nparams bound values (owned copies), NULL entries bind SQL NULL */
  int bind_bad;  /* a bind named a parameter the statement does not have */
  PGresult *res; /* the rows of the current execution, or NULL */
  int executed;
  int row; /* current row of res */
  int pre; /* db_prefetch: 1 = queued, its result not read yet; 2 = read, waiting in pre_res */
  PGresult *pre_res;
  struct pg_stmt *next;
};

/* Prefetched statements one pipeline holds at most (one more drains the queue first). */
#define PG_PREFETCH_MAX 8

struct pg_conn {
  struct db_conn base;
  PGconn *pg;
  char *target;
  struct pg_stmt *buckets[PG_BUCKETS];
  unsigned next_name;
  enum db_err err;
  char errmsg[256];
  int64_t changes;
  uint64_t epoch;        /* starts at 1; bumped by every re-established connection */
  int down;              /* the connection is lost */
  int tx_open;           /* a transaction was begun and not yet committed or rolled back */
  int listening;         /* a LISTEN succeeded on it: never re-established by the driver */
  int want_rw;           /* the target says target_session_attrs=read-write (or primary) */
  uint64_t ro_lost_seen; /* g_pg_ro_lost when this connection was established */
  int64_t retry_at;      /* clock_mono_ms of the next reconnect attempt */
  uint64_t ups_at_fail;  /* g_pg_ups when the last reconnect attempt failed */
  int backoff_ms;
  int pipe_on; /* in pipeline mode, with pipe_n queued results to read before the next answer */
  int pipe_n;
  /* the prefetched statements in the queue (NULL: reset since, its result is dropped) and their
     positions in it */
  struct pg_stmt *pre[PG_PREFETCH_MAX];
  int pre_at[PG_PREFETCH_MAX];
  int pre_n;
};

/* Connections of the process (re)established so far: once one connection has found the server
   back, the others waiting out a backoff step retry at once instead of answering "unavailable"
   for up to PG_BACKOFF_MAX_MS more. A count, not a time, so a frozen test clock holds. */
static _Atomic uint64_t g_pg_ups;

/* Times a connection of the process found its server read-only (SQLSTATE 25006, or the server's
   reported read-only state) and left it. The other connections to that server are idle
   elsewhere and would read stale data from it once before noticing: each one established
   before the latest such event is re-established before its next statement instead (through
   target_session_attrs, so it lands on the current primary, or fails while there is none). */
static _Atomic uint64_t g_pg_ro_lost;

static struct pg_conn *pc_of(struct db_conn *c) {
  return (struct pg_conn *)c;
}
static const struct pg_conn *cpc_of(const struct db_conn *c) {
  return (const struct pg_conn *)c;
}
static struct pg_stmt *ps_of(struct db_stmt *s) {
  return (struct pg_stmt *)s;
}

static void set_err(struct pg_conn *c, enum db_err e, const char *msg) {
  c->err = e;
  snprintf(c->errmsg, sizeof c->errmsg, "%s", msg ? msg : "");
  /* libpq messages end in a newline (sometimes with DETAIL lines): keep the first line */
  char *nl = strchr(c->errmsg, '\n');
  if (nl) *nl = '\0';
}

/* The connection is gone: later calls fail with DB_E_DOWN until a reconnect succeeds. */
static void mark_down(struct pg_conn *c) {
  if (c->down) return;
  c->down = 1;
  c->retry_at = clock_mono_ms(); /* the first reconnect attempt is immediate */
  c->backoff_ms = PG_BACKOFF_MIN_MS;
  log_warn("PostgreSQL connection lost: %s", c->errmsg);
}

/* 1 when the server says it is read-only: a hot standby, or default_transaction_read_only on
   (both reported by PostgreSQL 14 and later with every change, so no round trip). */
static int server_read_only(const PGconn *pg) {
  const char *hs = PQparameterStatus(pg, "in_hot_standby");
  const char *ro = PQparameterStatus(pg, "default_transaction_read_only");
  return (hs && !strcmp(hs, "on")) || (ro && !strcmp(ro, "on"));
}

/* 1 when target asks libpq for a read-write server (target_session_attrs read-write or
   primary): then a connection whose server turns read-only is left for a new one. */
static int target_wants_rw(const char *target) {
  int rw = 0;
  PQconninfoOption *opts = PQconninfoParse(target, NULL);
  for (PQconninfoOption *o = opts; o && o->keyword; o++)
    if (!strcmp(o->keyword, "target_session_attrs") && o->val)
      rw = !strcmp(o->val, "read-write") || !strcmp(o->val, "primary");
  PQconninfoFree(opts);
  return rw;
}

/* Record why res (or the connection) failed; marks the connection down when it is gone.

   A server that crashed while the connection was idle is not always reported as CONNECTION_BAD:
   libpq answers the next command with "server closed the connection unexpectedly" (no SQLSTATE)
   and may leave the status CONNECTION_OK (seen with PQprepare after pg_ctl stop -m immediate).
   An error result without a SQLSTATE comes from libpq itself, never from the server, so it is a
   connection failure too: the connection is re-established rather than reused. */
static void fail_res(struct pg_conn *c, const PGresult *res) {
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  int bad = PQstatus(c->pg) == CONNECTION_BAD || PQsocket(c->pg) < 0 ||
            (res && PQresultStatus(res) == PGRES_FATAL_ERROR && !state);
  set_err(c, db_pg_err_of(state, bad), res ? PQresultErrorMessage(res) : PQerrorMessage(c->pg));
  if (!c->errmsg[0]) set_err(c, c->err, PQerrorMessage(c->pg));
  if (c->err == DB_E_DOWN) {
    /* a read-only server where a read-write one was chosen: the others leave it too */
    if (state && !strcmp(state, "25006") && !c->down && c->want_rw && server_read_only(c->pg))
      atomic_fetch_add(&g_pg_ro_lost, 1);
    mark_down(c);
  }
}

/* Rows written, as SQLite counts them: only INSERT, UPDATE, DELETE and MERGE change the count. */
static void note_changes(struct pg_conn *c, PGresult *res) {
  const char *cmd = PQcmdStatus(res);
  if (!strncmp(cmd, "INSERT", 6) || !strncmp(cmd, "UPDATE", 6) || !strncmp(cmd, "DELETE", 6) ||
      !strncmp(cmd, "MERGE", 5))
    c->changes = strtoll(PQcmdTuples(res), NULL, 10);
}

/* Server notices (NOTICE, WARNING: "relation already exists, skipping") go to the debug log
   instead of libpq's default, stderr. */
static void on_notice(void *arg, const char *msg) {
  (void)arg;
  log_debug("PostgreSQL: %.*s", (int)strcspn(msg, "\n"), msg);
}

/* Open a libpq connection with the driver's defaults under the target's own settings, and the
   session timeouts the server has no other value for. NULL on failure (logged). */
static PGconn *pg_connect(const char *target, char *err, size_t errlen) {
  /* earlier entries are overridden by the expanded dbname (the target), which comes last */
  const char *keys[] = {"keepalives",
                        "keepalives_idle",
                        "keepalives_interval",
                        "keepalives_count",
                        "connect_timeout",
                        "application_name",
                        "dbname",
                        NULL};
  const char *vals[] = {"1", "5", "2", "3", "5", "controld", target, NULL};
  PGconn *pg = PQconnectdbParams(keys, vals, 1);
  if (!pg || PQstatus(pg) != CONNECTION_OK) {
    snprintf(err, errlen, "%s", pg ? PQerrorMessage(pg) : "out of memory");
    char *nl = strchr(err, '\n');
    if (nl) *nl = '\0';
    PQfinish(pg);
    return NULL;
  }
  PQsetNoticeProcessor(pg, on_notice, NULL);
  /* A statement or lock wait longer than 30 s is a fault, not load (the store's longest
     transaction, a probe round's writes, takes about a second); a session idle inside a
     transaction for a minute is a stuck thread whose locks must be released. JIT compilation is
     off: the store's statements are short, and the planner's cost for a probe round's due-sites
     query at 10,000 sites crosses jit_above_cost, where compiling took 11 of its 66 ms. Settings
     the operator made (postgresql.conf, ALTER ROLE, options= in the target) are kept. */
  PGresult *r =
      PQexec(pg, "SELECT set_config(s.name, d.v, false)"
                 " FROM (VALUES ('lock_timeout', '30s'), ('statement_timeout', '30s'),"
                 " ('idle_in_transaction_session_timeout', '60s'), ('jit', 'off')) AS d(name, v)"
                 " JOIN pg_settings s ON s.name = d.name WHERE s.source = 'default'");
  int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
  if (!ok) {
    snprintf(err, errlen, "session setup: %s", PQresultErrorMessage(r));
    char *nl = strchr(err, '\n');
    if (nl) *nl = '\0';
  }
  PQclear(r);
  if (!ok) {
    PQfinish(pg);
    return NULL;
  }
  return pg;
}

/* 1 when an idle connection is known to be gone: the server closed it (a crash, a restart, a
   failover to a standby promoted elsewhere) while nothing was sent. Without this check the next
   statement on it would fail ("server closed the connection unexpectedly") although a new
   connection would work at once. Reads only what the server already sent (no round trip):
   buffered messages (notices, parameter changes) stay libpq's to process as usual. */
static int idle_conn_gone(struct pg_conn *c) {
  for (int i = 0; i < 4; i++) {
    int fd = PQsocket(c->pg);
    if (fd < 0 || PQstatus(c->pg) == CONNECTION_BAD) return 1;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int pr = poll(&pfd, 1, 0);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) return 0; /* nothing to read: alive as far as can be told */
    /* readable: data, or the end of the stream (read until libpq sees which) */
    if (!PQconsumeInput(c->pg) || PQstatus(c->pg) == CONNECTION_BAD) return 1;
  }
  return 0;
}

/* Make the connection usable: re-establish a lost one when its backoff step is due (at most one
   attempt per step); an idle connection the server has closed is found lost first (so the
   statement goes to a new connection, e.g. to a promoted standby, instead of failing). A
   listening connection is never re-established here (it would come back without its LISTENs):
   it fails with DB_E_DOWN for its owner to reopen. 0, or -1 with DB_E_DOWN. */
static int ensure_up(struct pg_conn *c) {
  if (!c->down && !c->tx_open && idle_conn_gone(c)) {
    set_err(c, DB_E_DOWN, PQerrorMessage(c->pg));
    if (!c->errmsg[0]) set_err(c, DB_E_DOWN, "the server closed the connection");
    mark_down(c);
  }
  if (!c->down && !c->tx_open && c->want_rw && server_read_only(c->pg)) {
    /* the server this connection chose as read-write no longer is (its primary was fenced
       read-only, or it was demoted): leave it, as a new connection would */
    set_err(c, DB_E_DOWN,
            "the server became read-only (a standby, or a primary fenced before a "
            "switchover)");
    atomic_fetch_add(&g_pg_ro_lost, 1);
    mark_down(c);
  }
  if (!c->down && !c->tx_open && c->want_rw && atomic_load(&g_pg_ro_lost) != c->ro_lost_seen) {
    set_err(c, DB_E_DOWN, "another connection found the server read-only");
    mark_down(c);
  }
  if (!c->down) return 0;
  if (c->listening) {
    set_err(c, DB_E_DOWN, "listening connection lost");
    return -1;
  }
  if (c->tx_open) {
    /* the transaction died with the connection; the caller must roll back first, so nothing
       meant for it runs outside it */
    set_err(c, DB_E_DOWN, "connection lost inside a transaction");
    return -1;
  }
  int64_t now = clock_mono_ms();
  if (now < c->retry_at && atomic_load(&g_pg_ups) == c->ups_at_fail) {
    set_err(c, DB_E_DOWN, "database unavailable (reconnect pending)");
    return -1;
  }
  char err[256];
  uint64_t ups = atomic_load(&g_pg_ups); /* before the attempt: a success meanwhile counts */
  uint64_t ro_seen = atomic_load(&g_pg_ro_lost); /* likewise: an event meanwhile counts */
  PGconn *pg = pg_connect(c->target, err, sizeof err);
  if (!pg) {
    c->retry_at = now + c->backoff_ms;
    c->ups_at_fail = ups;
    log_warn("PostgreSQL reconnect failed (next attempt in %d ms): %s", c->backoff_ms, err);
    c->backoff_ms = c->backoff_ms * 2 > PG_BACKOFF_MAX_MS ? PG_BACKOFF_MAX_MS : c->backoff_ms * 2;
    set_err(c, DB_E_DOWN, err);
    return -1;
  }
  PQfinish(c->pg);
  c->pg = pg;
  c->down = 0;
  c->ro_lost_seen = ro_seen;
  atomic_fetch_add(&g_pg_ups, 1);
  c->epoch++; /* server-side prepared statements are gone: each is prepared again on use */
  log_info("PostgreSQL connection re-established (epoch %llu)", (unsigned long long)c->epoch);
  return 0;
}

/* ---- the pipeline (see the top of the file) ---- */

/* The queue is gone (read, or lost with the connection): its prefetched statements that were
   not read stay unexecuted, so their db_step fails (the connection is down, or re-established
   in a new epoch) instead of running outside the transaction they were sent in. */
static void pre_drop_all(struct pg_conn *c) {
  for (int i = 0; i < c->pre_n; i++)
    if (c->pre[i] && c->pre[i]->pre == 1) c->pre[i]->pre = 0;
  c->pre_n = 0;
}

/* The prefetched statement at queue position pos, or NULL. */
static struct pg_stmt *pre_at(struct pg_conn *c, int pos) {
  for (int i = 0; i < c->pre_n; i++)
    if (c->pre_at[i] == pos) return c->pre[i];
  return NULL;
}

/* The connection broke while the pipeline was in use: forget the queue (its results are gone). */
static void pipe_lost(struct pg_conn *c, const char *what) {
  char msg[200];
  snprintf(msg, sizeof msg, "%s: %s", what, PQerrorMessage(c->pg));
  set_err(c, DB_E_DOWN, msg);
  mark_down(c);
  c->pipe_on = 0;
  c->pipe_n = 0;
  pre_drop_all(c);
}

/* Enter pipeline mode if not yet in it; 0 or -1 (the connection is lost). */
static int pipe_enter(struct pg_conn *c) {
  if (c->pipe_on) return 0;
  if (PQenterPipelineMode(c->pg) != 1) {
    pipe_lost(c, "entering pipeline mode");
    return -1;
  }
  c->pipe_on = 1;
  c->pipe_n = 0;
  return 0;
}

/* Queue a parameterless command (BEGIN …) whose result is read with the queue. 0 or -1. */
static int pipe_queue_cmd(struct pg_conn *c, const char *sql) {
  if (pipe_enter(c) < 0) return -1;
  if (PQsendQueryParams(c->pg, sql, 0, NULL, NULL, NULL, NULL, 0) != 1) {
    pipe_lost(c, "sending");
    return -1;
  }
  c->pipe_n++;
  return 0;
}

/* End the pipeline: a sync point goes out with everything queued (and `last`, if the caller sent
   one more statement after the queue); the queued results are read in order (the first failure
   is recorded on c), then last's result is stored in *last (caller clears; NULL when the
   connection broke), then the sync. Returns 0, or -1 when a queued statement failed or the
   connection broke (err set). Without a pipeline and without last: 0. */
static int pipe_finish(struct pg_conn *c, PGresult **last) {
  int failed = 0;
  PGresult *r;
  if (last) *last = NULL;
  if (!c->pipe_on) return 0;
  if (PQpipelineSync(c->pg) != 1) {
    pipe_lost(c, "sending");
    return -1;
  }
  for (int i = 0; i < c->pipe_n; i++) {
    r = PQgetResult(c->pg);
    if (!r) {
      pipe_lost(c, "reading results");
      return -1;
    }
    ExecStatusType st = PQresultStatus(r);
    struct pg_stmt *ps = pre_at(c, i);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_PIPELINE_ABORTED &&
        !failed) {
      fail_res(c, r);
      failed = 1;
    }
    if (ps && ps->pre == 1) { /* kept for its db_step */
      ps->pre_res = r;
      ps->pre = 2;
    } else {
      PQclear(r);
    }
    PQclear(PQgetResult(c->pg)); /* the NULL that ends each statement's results */
    if (c->down) {
      c->pipe_on = c->pipe_n = 0;
      pre_drop_all(c);
      return -1;
    }
  }
  pre_drop_all(c);
  if (last) {
    *last = PQgetResult(c->pg);
    if (!*last) {
      pipe_lost(c, "reading results");
      return -1;
    }
    PQclear(PQgetResult(c->pg));
  }
  r = PQgetResult(c->pg); /* the sync */
  int synced = r && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
  PQclear(r);
  if (!synced || PQexitPipelineMode(c->pg) != 1) {
    if (last) {
      PQclear(*last);
      *last = NULL;
    }
    pipe_lost(c, "ending the pipeline");
    return -1;
  }
  c->pipe_on = 0;
  c->pipe_n = 0;
  return failed ? -1 : 0;
}

/* Before a synchronous call on the connection: read the queue. 0, or -1 (a queued statement
   failed or the connection broke; err set). */
static int pipe_drain(struct pg_conn *c) {
  return c->pipe_on ? pipe_finish(c, NULL) : 0;
}

/* Run a parameterless command; returns the result (caller clears) or NULL with err set. */
static PGresult *run(struct pg_conn *c, const char *sql, ExecStatusType want) {
  if (pipe_drain(c) < 0) return NULL;
  PGresult *r = PQexec(c->pg, sql);
  if (PQresultStatus(r) != want) {
    fail_res(c, r);
    PQclear(r);
    return NULL;
  }
  return r;
}

static int run_ok(struct pg_conn *c, const char *sql) {
  PGresult *r = run(c, sql, PGRES_COMMAND_OK);
  PQclear(r);
  return r ? 0 : -1;
}

static void stmt_clear_result(struct pg_stmt *s) {
  struct pg_conn *c = pc_of(s->base.conn);
  PQclear(s->res);
  s->res = NULL;
  s->executed = 0;
  s->row = -1;
  if (s->pre == 1) /* still queued: its result is dropped when read */
    for (int i = 0; i < c->pre_n; i++)
      if (c->pre[i] == s) c->pre[i] = NULL;
  PQclear(s->pre_res);
  s->pre_res = NULL;
  s->pre = 0;
}

static void stmt_clear_binds(struct pg_stmt *s) {
  for (int i = 0; i < s->nparams; i++) {
    free(s->vals[i]);
    s->vals[i] = NULL;
  }
  s->bind_bad = 0;
}

static void stmt_free(struct pg_stmt *s) {
  stmt_clear_result(s);
  stmt_clear_binds(s);
  free(s->vals);
  free(s->sql);
  free(s);
}

static void pg_close(struct db_conn *dc) {
  struct pg_conn *c = pc_of(dc);
  for (int b = 0; b < PG_BUCKETS; b++) {
    for (struct pg_stmt *s = c->buckets[b], *n; s; s = n) {
      n = s->next;
      stmt_free(s);
    }
  }
  PQfinish(c->pg);
  free(c->target);
  free(c);
}

static unsigned bucket_of(const char *key) {
  uintptr_t k = (uintptr_t)key;
  return (unsigned)((k >> 3) ^ (k >> 11)) % PG_BUCKETS;
}

static struct db_stmt *pg_prep(struct db_conn *dc, const char *sql) {
  struct pg_conn *c = pc_of(dc);
  c->err = DB_E_NONE;
  c->errmsg[0] = '\0';
  if (ensure_up(c) < 0) return NULL;
  unsigned b = bucket_of(sql);
  struct pg_stmt *s = c->buckets[b];
  while (s && s->key != sql)
    s = s->next;
  if (!s) {
    s = calloc(1, sizeof *s);
    if (!s) {
      set_err(c, DB_E_OTHER, "out of memory");
      return NULL;
    }
    s->base.conn = dc;
    s->key = sql;
    s->row = -1;
    s->sql = db_placeholders_pg(sql, &s->nparams);
    if (!s->sql || (s->nparams && !(s->vals = calloc((size_t)s->nparams, sizeof *s->vals)))) {
      set_err(c, DB_E_OTHER, s->sql ? "out of memory" : "malformed placeholder");
      log_error("cannot prepare %s: %s", sql, c->errmsg);
      free(s->sql);
      free(s);
      return NULL;
    }
    snprintf(s->name, sizeof s->name, "s%u", ++c->next_name);
    s->next = c->buckets[b];
    c->buckets[b] = s;
  }
  stmt_clear_result(s);
  stmt_clear_binds(s);
  if (s->prepared_epoch != c->epoch) {
    /* the first use on this connection: prepared synchronously, after the queue */
    if (pipe_drain(c) < 0) return NULL;
    PGresult *r = PQprepare(c->pg, s->name, s->sql, 0, NULL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      fail_res(c, r);
      PQclear(r);
      if (c->err != DB_E_DOWN) log_error("cannot prepare %s: %s", sql, c->errmsg);
      return NULL;
    }
    PQclear(r);
    s->prepared_epoch = c->epoch;
  }
  return &s->base;
}

/* Store v as parameter idx (takes ownership of v; NULL binds SQL NULL). */
static void bind_take(struct pg_stmt *s, int idx, char *v) {
  if (idx < 1 || idx > s->nparams) {
    s->bind_bad = 1;
    free(v);
    return;
  }
  free(s->vals[idx - 1]);
  s->vals[idx - 1] = v;
}

static void pg_bind_i64(struct db_stmt *ds, int idx, int64_t v) {
  char buf[24];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  bind_take(ps_of(ds), idx, strdup(buf));
}

static void pg_bind_int(struct db_stmt *ds, int idx, int v) {
  pg_bind_i64(ds, idx, v);
}

static void pg_bind_double(struct db_stmt *ds, int idx, double v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.17g", v);
  bind_take(ps_of(ds), idx, strdup(buf));
}

static void pg_bind_textn(struct db_stmt *ds, int idx, const char *v, size_t n) {
  char *copy = NULL;
  if (v) {
    copy = malloc(n + 1);
    if (copy) {
      memcpy(copy, v, n);
      copy[n] = '\0';
    } else {
      ps_of(ds)->bind_bad = 1;
    }
  }
  bind_take(ps_of(ds), idx, copy);
}

static void pg_bind_text(struct db_stmt *ds, int idx, const char *v) {
  pg_bind_textn(ds, idx, v, v ? strlen(v) : 0);
}

static void pg_bind_null(struct db_stmt *ds, int idx) {
  bind_take(ps_of(ds), idx, NULL);
}

static int step_result(struct pg_conn *c, struct pg_stmt *s, PGresult *r);

static int pg_step(struct db_stmt *ds) {
  struct pg_stmt *s = ps_of(ds);
  struct pg_conn *c = pc_of(ds->conn);
  if (s->executed) {
    if (s->res && ++s->row < PQntuples(s->res)) return DB_ROW;
    PQclear(s->res);
    s->res = NULL;
    return DB_DONE;
  }
  PGresult *r;
  if (s->pre == 1 && pipe_finish(c, NULL) < 0) { /* its queue goes out now */
    stmt_clear_result(s);
    return DB_ERR;
  }
  if (s->pre == 2) { /* sent by db_prefetch, answered */
    r = s->pre_res;
    s->pre_res = NULL;
    s->pre = 0;
    return step_result(c, s, r);
  }
  if (s->bind_bad) {
    set_err(c, DB_E_OTHER, "bind: no such parameter (or out of memory)");
    log_error("%s: %s", s->key, c->errmsg);
    stmt_clear_binds(s);
    return DB_ERR;
  }
  if (c->down || s->prepared_epoch != c->epoch) {
    set_err(c, DB_E_DOWN, "connection lost since the statement was prepared");
    return DB_ERR;
  }
  if (c->pipe_on) { /* the queue goes out with this statement, in one round trip */
    if (PQsendQueryPrepared(c->pg, s->name, s->nparams, (const char *const *)s->vals, NULL, NULL,
                            0) != 1) {
      pipe_lost(c, "sending");
      return DB_ERR;
    }
    if (pipe_finish(c, &r) < 0) {
      PQclear(r);
      return DB_ERR;
    }
  } else {
    r = PQexecPrepared(c->pg, s->name, s->nparams, (const char *const *)s->vals, NULL, NULL, 0);
  }
  return step_result(c, s, r);
}

/* The first db_step's answer from r (taken). */
static int step_result(struct pg_conn *c, struct pg_stmt *s, PGresult *r) {
  ExecStatusType st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    fail_res(c, r);
    PQclear(r);
    return DB_ERR;
  }
  note_changes(c, r);
  s->executed = 1;
  if (st == PGRES_TUPLES_OK && PQntuples(r) > 0) {
    s->res = r;
    s->row = 0;
    return DB_ROW;
  }
  PQclear(r);
  return DB_DONE;
}

/* The current row's value of col, or NULL for SQL NULL or no such row or column. */
static const char *cell(struct pg_stmt *s, int col) {
  if (!s->res || s->row < 0 || s->row >= PQntuples(s->res) || col < 0 || col >= PQnfields(s->res))
    return NULL;
  if (PQgetisnull(s->res, s->row, col)) return NULL;
  return PQgetvalue(s->res, s->row, col);
}

/* Booleans come back as "t"/"f" in text format; read them as 1/0 like SQLite's integers. */
static int64_t pg_col_i64(struct db_stmt *ds, int col) {
  const char *v = cell(ps_of(ds), col);
  if (!v) return 0;
  if (v[0] == 't' && !v[1]) return 1;
  if (v[0] == 'f' && !v[1]) return 0;
  return strtoll(v, NULL, 10);
}

static int pg_col_int(struct db_stmt *ds, int col) {
  return (int)pg_col_i64(ds, col);
}

static double pg_col_double(struct db_stmt *ds, int col) {
  const char *v = cell(ps_of(ds), col);
  if (!v) return 0.0;
  if (v[0] == 't' && !v[1]) return 1.0;
  if (v[0] == 'f' && !v[1]) return 0.0;
  return strtod(v, NULL);
}

static const char *pg_col_text(struct db_stmt *ds, int col) {
  return cell(ps_of(ds), col);
}

static int pg_col_null(struct db_stmt *ds, int col) {
  return cell(ps_of(ds), col) == NULL;
}

static void pg_reset(struct db_stmt *ds) {
  stmt_clear_result(ps_of(ds));
}

/* Queue s (bound) in the pipeline without reading its answer; its position in the queue, or -1
   (err set). prefetch: keep its result for its db_step (a full set of prefetched statements is
   drained first). */
static int pipe_send(struct pg_conn *c, struct pg_stmt *s, int prefetch) {
  if (s->bind_bad) {
    set_err(c, DB_E_OTHER, "bind: no such parameter (or out of memory)");
    log_error("%s: %s", s->key, c->errmsg);
    stmt_clear_binds(s);
    return -1;
  }
  if (c->down || s->prepared_epoch != c->epoch) {
    set_err(c, DB_E_DOWN, "connection lost since the statement was prepared");
    return -1;
  }
  stmt_clear_result(s);
  if (prefetch && c->pre_n == PG_PREFETCH_MAX && pipe_drain(c) < 0) return -1;
  if (pipe_enter(c) < 0) return -1;
  if (PQsendQueryPrepared(c->pg, s->name, s->nparams, (const char *const *)s->vals, NULL, NULL,
                          0) != 1) {
    pipe_lost(c, "sending");
    return -1;
  }
  return c->pipe_n++;
}

static int pg_defer(struct db_stmt *ds) {
  return pipe_send(pc_of(ds->conn), ps_of(ds), 0) < 0 ? -1 : 0;
}

static int pg_prefetch(struct db_stmt *ds) {
  struct pg_stmt *s = ps_of(ds);
  struct pg_conn *c = pc_of(ds->conn);
  int pos = pipe_send(c, s, 1);
  if (pos < 0) return -1;
  c->pre[c->pre_n] = s;
  c->pre_at[c->pre_n++] = pos;
  s->pre = 1;
  return 0;
}

static int64_t pg_changes(struct db_conn *dc) {
  return pc_of(dc)->changes;
}

static int64_t pg_last_id(struct db_conn *dc) {
  struct pg_conn *c = pc_of(dc);
  if (c->down) {
    set_err(c, DB_E_DOWN, "database unavailable");
    return -1;
  }
  PGresult *r = run(c, "SELECT lastval()", PGRES_TUPLES_OK);
  if (!r) return -1;
  int64_t id = PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
  PQclear(r);
  return id;
}

static int pg_exec(struct db_conn *dc, const char *sql) {
  struct pg_conn *c = pc_of(dc);
  c->err = DB_E_NONE;
  c->errmsg[0] = '\0';
  if (ensure_up(c) < 0) return -1;
  if (pipe_drain(c) < 0) return -1;
  PGresult *r = PQexec(c->pg, sql);
  ExecStatusType st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    fail_res(c, r);
    PQclear(r);
    return -1;
  }
  note_changes(c, r);
  PQclear(r);
  return 0;
}

/* BEGIN is queued, not sent: it goes out with the transaction's first statement. */
static int begin(struct pg_conn *c, const char *sql) {
  c->err = DB_E_NONE;
  c->errmsg[0] = '\0';
  if (ensure_up(c) < 0) return -1;
  if (pipe_drain(c) < 0 || pipe_queue_cmd(c, sql) < 0) return -1;
  c->tx_open = 1;
  return 0;
}

static int pg_begin_write(struct db_conn *dc) {
  return begin(pc_of(dc), "BEGIN");
}

static int pg_begin_read(struct db_conn *dc) {
  return begin(pc_of(dc), "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
}

static int pg_commit(struct db_conn *dc) {
  struct pg_conn *c = pc_of(dc);
  if (c->down) {
    set_err(c, DB_E_DOWN, "connection lost inside a transaction");
    return -1;
  }
  PGresult *r = NULL;
  if (c->pipe_on) { /* COMMIT goes out with the queue; its answer is the commit's */
    if (PQsendQueryParams(c->pg, "COMMIT", 0, NULL, NULL, NULL, NULL, 0) != 1) {
      pipe_lost(c, "sending");
      return -1;
    }
    if (pipe_finish(c, &r) < 0) {
      PQclear(r);
      return -1;
    }
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      fail_res(c, r);
      PQclear(r);
      return -1;
    }
  } else {
    r = run(c, "COMMIT", PGRES_COMMAND_OK);
  }
  if (!r) return -1;
  /* COMMIT of a transaction that already failed answers ROLLBACK, not an error */
  int rolled_back = !strcmp(PQcmdStatus(r), "ROLLBACK");
  PQclear(r);
  c->tx_open = 0;
  if (rolled_back) {
    set_err(c, DB_E_OTHER, "the transaction was aborted by an earlier error and rolled back");
    return -1;
  }
  return 0;
}

static int pg_in_tx(struct db_conn *dc) {
  struct pg_conn *c = pc_of(dc);
  /* BEGIN may still be queued; a lost connection's status says nothing about the transaction */
  if (c->pipe_on || c->down) return c->tx_open;
  switch (PQtransactionStatus(c->pg)) {
  case PQTRANS_ACTIVE:
  case PQTRANS_INTRANS:
  case PQTRANS_INERROR:
    return 1;
  case PQTRANS_IDLE:
    return 0;
  default:
    return c->tx_open; /* the connection is gone; the transaction is still the caller's */
  }
}

static void pg_rollback(struct db_conn *dc) {
  struct pg_conn *c = pc_of(dc);
  if (!c->down && c->pipe_on) {
    /* the queue's failure, if any, is the caller's reason to roll back: keep its error */
    enum db_err e = c->err;
    char msg[sizeof c->errmsg];
    memcpy(msg, c->errmsg, sizeof msg);
    (void)pipe_finish(c, NULL);
    if (!c->down) {
      c->err = e;
      memcpy(c->errmsg, msg, sizeof msg);
    }
  }
  if (!c->down && PQtransactionStatus(c->pg) != PQTRANS_IDLE) {
    /* a failure here leaves the error the caller is rolling back for in place */
    PGresult *r = PQexec(c->pg, "ROLLBACK");
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    /* a failed ROLLBACK without a SQLSTATE is libpq's: the connection is gone (see fail_res) */
    if (PQstatus(c->pg) == CONNECTION_BAD || PQsocket(c->pg) < 0 ||
        (PQresultStatus(r) == PGRES_FATAL_ERROR && !state)) {
      if (!c->errmsg[0]) set_err(c, DB_E_DOWN, PQerrorMessage(c->pg));
      mark_down(c);
    }
    PQclear(r);
  }
  c->tx_open = 0;
}

static int pg_migrate_lock(struct db_conn *dc) {
  struct pg_conn *c = pc_of(dc);
  if (c->down) {
    set_err(c, DB_E_DOWN, "database unavailable");
    return -1;
  }
  /* migrations may take long on a big database, and another replica may be migrating: no
     statement limit, and the lock is waited for up to 5 minutes (this transaction only) */
  if (run_ok(c, "SET LOCAL statement_timeout = 0") < 0 ||
      run_ok(c, "SET LOCAL lock_timeout = '300s'") < 0)
    return -1;
  PGresult *r = run(c, "SELECT pg_advisory_xact_lock(" PG_MIGRATE_LOCK_KEY ")", PGRES_TUPLES_OK);
  PQclear(r);
  return r ? 0 : -1;
}

/* The migration record, created by the first db_schema_record (in the migration transaction). */
static const char sql_migrations_table[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY,"
    " name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())";

/* Read-only (it also runs in read transactions, e.g. for /healthz): a database without the
   table is at version 0. */
static int pg_schema_version(struct db_conn *dc) {
  struct pg_conn *c = pc_of(dc);
  if (c->down) {
    set_err(c, DB_E_DOWN, "database unavailable");
    return -1;
  }
  PGresult *r = run(c, "SELECT to_regclass('schema_migrations') IS NOT NULL", PGRES_TUPLES_OK);
  if (!r) return -1;
  int exists = PQgetvalue(r, 0, 0)[0] == 't';
  PQclear(r);
  if (!exists) return 0;
  r = run(c, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations", PGRES_TUPLES_OK);
  if (!r) return -1;
  int v = (int)strtol(PQgetvalue(r, 0, 0), NULL, 10);
  PQclear(r);
  return v;
}

static int pg_schema_record(struct db_conn *dc, int version, const char *name) {
  struct pg_conn *c = pc_of(dc);
  if (c->down) {
    set_err(c, DB_E_DOWN, "database unavailable");
    return -1;
  }
  if (run_ok(c, sql_migrations_table) < 0) return -1;
  char ver[16];
  snprintf(ver, sizeof ver, "%d", version);
  const char *vals[2] = {ver, name ? name : ""};
  PGresult *r = PQexecParams(c->pg, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                             2, NULL, vals, NULL, NULL, 0);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) fail_res(c, r);
  PQclear(r);
  return ok ? 0 : -1;
}

static enum db_err pg_err(const struct db_conn *dc) {
  return cpc_of(dc)->err;
}
static const char *pg_errmsg(const struct db_conn *dc) {
  return cpc_of(dc)->errmsg;
}

static void pg_clear_err(struct db_conn *dc) {
  pc_of(dc)->err = DB_E_NONE;
  pc_of(dc)->errmsg[0] = '\0';
}

static int pg_up(struct db_conn *dc) {
  struct pg_conn *c = pc_of(dc);
  if (!c->down && (PQstatus(c->pg) == CONNECTION_BAD || (!c->tx_open && idle_conn_gone(c)))) {
    set_err(c, DB_E_DOWN, PQerrorMessage(c->pg));
    if (!c->errmsg[0]) set_err(c, DB_E_DOWN, "the server closed the connection");
    mark_down(c);
  }
  return !c->down;
}

static uint64_t pg_epoch(const struct db_conn *dc) {
  return cpc_of(dc)->epoch;
}

/* A channel name that needs no quoting: [a-z_][a-z0-9_]*, at most 63 bytes (NAMEDATALEN - 1). */
static int channel_ok(const char *ch) {
  size_t n = ch ? strlen(ch) : 0;
  if (n == 0 || n > 63 || (ch[0] >= '0' && ch[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((ch[i] >= 'a' && ch[i] <= 'z') || (ch[i] >= '0' && ch[i] <= '9') || ch[i] == '_'))
      return 0;
  return 1;
}

static int pg_listen(struct db_conn *dc, const char *channel) {
  struct pg_conn *c = pc_of(dc);
  char sql[80];
  c->err = DB_E_NONE;
  c->errmsg[0] = '\0';
  if (!channel_ok(channel)) {
    set_err(c, DB_E_OTHER, "invalid channel name");
    return -1;
  }
  if (c->down) {
    set_err(c, DB_E_DOWN, "database unavailable");
    return -1;
  }
  snprintf(sql, sizeof sql, "LISTEN %s", channel);
  if (run_ok(c, sql) < 0) return -1;
  c->listening = 1;
  return 0;
}

static void copy_out(char *dst, size_t cap, const char *src) {
  if (cap) snprintf(dst, cap, "%s", src ? src : "");
}

/* Lost connection while listening: recorded, marked down (the caller reopens). */
static int listen_lost(struct pg_conn *c, const char *what) {
  char msg[200];
  snprintf(msg, sizeof msg, "%s: %s", what, PQerrorMessage(c->pg));
  set_err(c, DB_E_DOWN, msg);
  mark_down(c);
  return -1;
}

static int pg_wait_notify(struct db_conn *dc, int timeout_ms, char *channel, size_t chcap,
                          char *payload, size_t plcap) {
  struct pg_conn *c = pc_of(dc);
  int64_t end = clock_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
  c->err = DB_E_NONE;
  c->errmsg[0] = '\0';
  if (c->down) {
    set_err(c, DB_E_DOWN, "database unavailable");
    return -1;
  }
  for (;;) {
    PGnotify *n = PQnotifies(c->pg);
    if (n) {
      copy_out(channel, chcap, n->relname);
      copy_out(payload, plcap, n->extra);
      PQfreemem(n);
      return 1;
    }
    int64_t left = end - clock_mono_ms();
    if (left <= 0) return 0;
    int fd = PQsocket(c->pg);
    if (fd < 0) return listen_lost(c, "no socket");
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int pr = poll(&pfd, 1, (int)left);
    if (pr < 0) {
      if (errno == EINTR) continue;
      return listen_lost(c, "poll");
    }
    if (pr == 0) return 0;
    if (!PQconsumeInput(c->pg) || PQstatus(c->pg) == CONNECTION_BAD)
      return listen_lost(c, "reading notifications");
  }
}

const struct db_ops db_pg_ops = {
    .kind = DB_PG,
    .close = pg_close,
    .prep = pg_prep,
    .bind_i64 = pg_bind_i64,
    .bind_int = pg_bind_int,
    .bind_double = pg_bind_double,
    .bind_text = pg_bind_text,
    .bind_textn = pg_bind_textn,
    .bind_null = pg_bind_null,
    .step = pg_step,
    .defer = pg_defer,
    .prefetch = pg_prefetch,
    .col_i64 = pg_col_i64,
    .col_int = pg_col_int,
    .col_double = pg_col_double,
    .col_text = pg_col_text,
    .col_null = pg_col_null,
    .reset = pg_reset,
    .changes = pg_changes,
    .last_id = pg_last_id,
    .exec = pg_exec,
    .begin_write = pg_begin_write,
    .begin_read = pg_begin_read,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .in_tx = pg_in_tx,
    .migrate_lock = pg_migrate_lock,
    .schema_version = pg_schema_version,
    .schema_record = pg_schema_record,
    .err = pg_err,
    .errmsg = pg_errmsg,
    .clear_err = pg_clear_err,
    .up = pg_up,
    .epoch = pg_epoch,
    .listen = pg_listen,
    .wait_notify = pg_wait_notify,
};

struct db_conn *db_pg_open(const char *conninfo) {
  char err[256];
  PGconn *pg = pg_connect(conninfo, err, sizeof err);
  if (!pg) {
    log_error("cannot connect to PostgreSQL: %s", err);
    return NULL;
  }
  struct pg_conn *c = calloc(1, sizeof *c);
  if (!c || !(c->target = strdup(conninfo))) {
    log_error("out of memory");
    free(c);
    PQfinish(pg);
    return NULL;
  }
  c->base.ops = &db_pg_ops;
  c->pg = pg;
  c->want_rw = target_wants_rw(conninfo);
  c->ro_lost_seen = atomic_load(&g_pg_ro_lost);
  c->epoch = 1;
  atomic_fetch_add(&g_pg_ups, 1);
  c->backoff_ms = PG_BACKOFF_MIN_MS;
  return &c->base;
}
