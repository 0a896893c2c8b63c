#!/usr/bin/env python3
"""test_schema_dialects — schema/sqlite/ and schema/pg/ end with the same schema.

Applies every SQLite migration to a fresh SQLite file (python's sqlite3, the library controld
links) and every PostgreSQL migration to a fresh database in a temporary PostgreSQL cluster
(pgfixture.py), then compares what each engine reports about itself (PRAGMA table_info /
index_list / index_info / foreign_key_list against information_schema, pg_index and
pg_constraint): tables, columns (name, type class integer/text/real, NOT NULL, default),
primary keys, UNIQUE constraints, indexes by name (columns, unique, partial) and foreign keys.
On PostgreSQL every integer column must be BIGINT (INTEGER is 32-bit; times are int64 ms).
A missing or different column, index or key on either side fails the test. CHECK constraints
are compared by behaviour (the same bad rows refused by both), and 0004's data-moving UPDATEs by
their result on the same rows.
"""

import os
import re
import sqlite3
import sys

import harness
import pgfixture

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.abspath(os.path.join(HERE, "..", "..", "schema"))


def migration_files(dialect):
    d = os.path.join(SCHEMA, dialect)
    return sorted(os.path.join(d, f) for f in os.listdir(d)
                  if re.match(r"^\d{4}_.*\.sql$", f))


# ---- normalization ----

def sqlite_type_class(decl):
    """SQLite's affinity rules (datatype3.html §3.1), as a class."""
    t = decl.upper()
    if "INT" in t:
        return "integer"
    if "CHAR" in t or "CLOB" in t or "TEXT" in t:
        return "text"
    if "REAL" in t or "FLOA" in t or "DOUB" in t:
        return "real"
    return "other:" + t


PG_TYPE_CLASS = {"bigint": "integer", "integer": "integer", "smallint": "integer",
                 "text": "text", "character varying": "text",
                 "double precision": "real", "real": "real"}


def norm_default(d):
    """A column default as text both engines agree on: the literal without casts or parens."""
    if d is None:
        return None
    d = d.strip()
    d = re.sub(r"::[a-z ]+$", "", d)  # PostgreSQL: '[]'::text, 0::bigint
    while d.startswith("(") and d.endswith(")"):
        d = d[1:-1].strip()
    return d


def norm_where(w):
    if w is None:
        return None
    w = w.strip()
    w = re.sub(r"::[a-z ]+", "", w)
    w = w.replace("(", "").replace(")", "")
    return re.sub(r"\s+", " ", w).strip().lower()


# ---- SQLite side ----

def sqlite_schema(path):
    con = sqlite3.connect(path)
    try:
        for f in migration_files("sqlite"):
            with open(f, encoding="utf-8") as fh:
                con.executescript(fh.read())
        return _sqlite_describe(con)
    finally:
        con.close()


def _sqlite_describe(con):
    out = {}
    tables = [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name")]
    for t in tables:
        cols = {}
        pk = []
        for cid, name, decl, notnull, dflt, pkpos in con.execute("PRAGMA table_info(%s)" % t):
            cols[name] = (sqlite_type_class(decl), bool(notnull or pkpos), norm_default(dflt))
            if pkpos:
                pk.append((pkpos, name))
        uniques = set()
        indexes = {}
        for _, iname, unique, origin, partial in con.execute("PRAGMA index_list(%s)" % t):
            icols = tuple(r[2] for r in sorted(con.execute("PRAGMA index_info(%s)" % iname)))
            if origin == "u":
                uniques.add(icols)
            elif origin == "c":
                where = None
                if partial:
                    sql = con.execute("SELECT sql FROM sqlite_master WHERE type = 'index' "
                                      "AND name = ?", (iname,)).fetchone()[0]
                    where = norm_where(re.split(r"\bWHERE\b", sql, flags=re.I)[1])
                indexes[iname] = (icols, bool(unique), where)
        fks = set()
        for row in con.execute("PRAGMA foreign_key_list(%s)" % t):
            _, _, table, frm, to, _, on_delete, _ = row
            fks.add((frm, table, to, on_delete.upper()))
        out[t] = {"columns": cols, "pk": tuple(n for _, n in sorted(pk)), "unique": uniques,
                  "indexes": indexes, "fks": fks}
    return out


# ---- PostgreSQL side ----

def pg_schema(cluster, dbname):
    """schema/pg applied file by file to dbname (an empty database), then described."""
    for f in migration_files("pg"):
        cluster.psql(dbname, file=f)
    return _pg_describe(cluster, dbname), cluster.psql(
        dbname, "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = 'public' AND data_type = 'integer'")


def _pg_describe(cluster, db):
    q = lambda sql: cluster.psql(db, sql, null="\\N")  # noqa: E731
    nul = lambda v: None if v == "\\N" else v  # noqa: E731
    out = {}
    for (t,) in q("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                  "'public' AND table_type = 'BASE TABLE' ORDER BY table_name"):
        out[t] = {"columns": {}, "pk": (), "unique": set(), "indexes": {}, "fks": set()}
    for t, name, dtype, nullable, dflt in q(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = 'public'"):
        out[t]["columns"][name] = (PG_TYPE_CLASS.get(dtype, "other:" + dtype),
                                   nullable == "NO", norm_default(nul(dflt)))
    # constraints: primary key, unique, foreign key, with their columns in order
    for t, ctype, cols, ftable, fcols, ondel in q(
            "SELECT c.conrelid::regclass::text, c.contype, "
            "  (SELECT string_agg(a.attname, ',' ORDER BY k.n) FROM unnest(c.conkey) "
            "   WITH ORDINALITY k(attnum, n) JOIN pg_attribute a ON a.attrelid = c.conrelid "
            "   AND a.attnum = k.attnum), "
            "  c.confrelid::regclass::text, "
            "  (SELECT string_agg(a.attname, ',' ORDER BY k.n) FROM unnest(c.confkey) "
            "   WITH ORDINALITY k(attnum, n) JOIN pg_attribute a ON a.attrelid = c.confrelid "
            "   AND a.attnum = k.attnum), "
            "  c.confdeltype "
            "FROM pg_constraint c JOIN pg_namespace ns ON ns.oid = c.connamespace "
            "WHERE ns.nspname = 'public' AND c.contype IN ('p', 'u', 'f')"):
        cols = tuple(cols.split(","))
        if ctype == "p":
            out[t]["pk"] = cols
        elif ctype == "u":
            out[t]["unique"].add(cols)
        else:
            action = {"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE", "n": "SET NULL",
                      "d": "SET DEFAULT"}[ondel]
            out[t]["fks"].add((cols[0], ftable, fcols, action))
    # indexes that no constraint owns
    for t, iname, unique, cols, where in q(
            "SELECT t.relname, i.relname, x.indisunique, "
            "  (SELECT string_agg(a.attname, ',' ORDER BY k.n) FROM unnest(x.indkey) "
            "   WITH ORDINALITY k(attnum, n) JOIN pg_attribute a ON a.attrelid = t.oid "
            "   AND a.attnum = k.attnum), "
            "  pg_get_expr(x.indpred, x.indrelid) "
            "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "JOIN pg_class t ON t.oid = x.indrelid JOIN pg_namespace ns ON ns.oid = t.relnamespace "
            "WHERE ns.nspname = 'public' "
            "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)"):
        out[t]["indexes"][iname] = (tuple(cols.split(",")), unique == "t", norm_where(nul(where)))
    return out


# ---- comparison ----

def differences(lite, pg):
    """Human-readable differences between two described schemas ([] when equal)."""
    diffs = []
    for t in sorted(set(lite) | set(pg)):
        if t not in pg:
            diffs.append("table %s: only in SQLite" % t)
            continue
        if t not in lite:
            diffs.append("table %s: only in PostgreSQL" % t)
            continue
        a, b = lite[t], pg[t]
        for c in sorted(set(a["columns"]) | set(b["columns"])):
            if c not in b["columns"]:
                diffs.append("%s.%s: only in SQLite" % (t, c))
            elif c not in a["columns"]:
                diffs.append("%s.%s: only in PostgreSQL" % (t, c))
            elif a["columns"][c] != b["columns"][c]:
                diffs.append("%s.%s: SQLite (type, not null, default) %r, PostgreSQL %r"
                             % (t, c, a["columns"][c], b["columns"][c]))
        for key in ("pk", "unique", "fks"):
            if a[key] != b[key]:
                diffs.append("%s %s: SQLite %r, PostgreSQL %r" % (t, key, a[key], b[key]))
        for i in sorted(set(a["indexes"]) | set(b["indexes"])):
            x, y = a["indexes"].get(i), b["indexes"].get(i)
            if x != y:
                diffs.append("%s index %s (columns, unique, where): SQLite %r, PostgreSQL %r"
                             % (t, i, x, y))
    return diffs


# ---- tests ----

def test_both_dialects_have_the_same_migration_numbers():
    nums = {d: [os.path.basename(f)[:4] for f in migration_files(d)] for d in ("sqlite", "pg")}
    assert nums["sqlite"] and nums["sqlite"] == nums["pg"], nums
    names = {d: [os.path.basename(f) for f in migration_files(d)] for d in ("sqlite", "pg")}
    assert names["sqlite"] == names["pg"], names


def test_sqlite_and_postgresql_end_with_the_same_schema(tmp):
    lite = sqlite_schema(os.path.join(tmp, "schema.db"))
    cl = pgfixture.cluster()
    check = cl.new_database("schema_check", template=None)
    pg, narrow = pg_schema(cl, check)
    assert "sites" in lite and "cdnca_meta" in lite, sorted(lite)
    ncols = sum(len(t["columns"]) for t in lite.values())
    nidx = sum(len(t["indexes"]) for t in lite.values())
    print("compared %d tables, %d columns, %d indexes" % (len(lite), ncols, nidx))
    diffs = differences(lite, pg)
    assert not diffs, "the dialects differ:\n  " + "\n  ".join(diffs)
    assert not narrow, "32-bit INTEGER columns on PostgreSQL (use BIGINT): %r" % narrow
    # the ordered-write row exists in both, the same
    con = sqlite3.connect(os.path.join(tmp, "schema.db"))
    rows = con.execute("SELECT id, gen FROM cdnca_meta").fetchall()
    con.close()
    assert rows == [(1, 0)], rows
    assert cl.psql(check, "SELECT id, gen FROM cdnca_meta") == [["1", "0"]]


def test_a_missing_column_is_found_on_either_side(tmp):
    """The comparison itself: a column dropped on one side, an index renamed, a type changed
    and an integer narrowed are each reported."""
    lite = sqlite_schema(os.path.join(tmp, "schema.db"))
    cl = pgfixture.cluster()
    check2 = cl.new_database("schema_check2", template=None)
    pg, _ = pg_schema(cl, check2)
    assert differences(lite, pg) == []
    cl.psql(check2, "ALTER TABLE sites DROP COLUMN nr_failure_min_volume")
    cl.psql(check2, "ALTER INDEX audit_at RENAME TO audit_when")
    cl.psql(check2, "ALTER TABLE events ALTER COLUMN title DROP NOT NULL")
    pg2 = _pg_describe(cl, check2)
    d = differences(lite, pg2)
    assert any(x.startswith("sites.nr_failure_min_volume: only in SQLite") for x in d), d
    assert any("index audit_at" in x for x in d) and any("index audit_when" in x for x in d), d
    assert any(x.startswith("events.title:") for x in d), d
    con = sqlite3.connect(os.path.join(tmp, "schema.db"))
    con.execute("ALTER TABLE nodes DROP COLUMN version")
    lite2 = _sqlite_describe(con)
    con.close()
    assert "nodes.version: only in PostgreSQL" in differences(lite2, pg), differences(lite2, pg)


# ---- behaviour: data-moving migrations and CHECK constraints ----

# rows written before 0004 (the fleet flags and token roles it derives), in both engines
SEED = [
    "INSERT INTO sites (name, hc_enabled, current_level, all_unhealthy, failback_notified, "
    "created_at, updated_at) VALUES ('a', 1, 2, 1, 0, 1, 1), ('b', 1, 1, 1, 2, 1, 1), "
    "('c', 0, 1, 0, 0, 1, 1), ('d', 1, 1, 1, 0, 1, 1)",
    "INSERT INTO origins (site_id, level, address, port, scheme, enabled, created_at) VALUES "
    "(1, 1, 'x', 80, 'http', 1, 1), (1, 2, 'y', 80, 'http', 1, 1), (2, 1, 'z', 80, 'http', 1, 1), "
    "(4, 1, 'p', 80, 'http', 1, 1), (4, 2, 'q', 80, 'http', 1, 1), (4, 3, 'r', 80, 'http', 0, 1)",
    "INSERT INTO tokens (kind, hash, created_at) VALUES ('admin', 'h1', 1), ('admin', 'h2', 1), "
    "('node', 'h3', 1)",
    "INSERT INTO verdicts (round_id, site_id, origin_id, round_at, source, verdict, state_after, "
    "votes) VALUES (7, 1, 1, 5, 'nodes', 'failure', 'unhealthy', '[1]'), "
    "(7, 1, 2, 5, NULL, NULL, 'unknown', '[]'), (8, 4, 4, 6, 'control', 'success', 'healthy', '[]')",
]
AFTER = [
    "SELECT id, name, state_paused, state_on_backup, state_all_down, state_failback_available "
    "FROM sites ORDER BY id",
    "SELECT id, kind, COALESCE(name, '-'), COALESCE(role, '-') FROM tokens ORDER BY id",
    "SELECT id, gen FROM cdnca_meta",
    # 0010 rebuilds verdicts on SQLite (to drop its foreign keys): every row kept as it was
    "SELECT id, round_id, site_id, origin_id, round_at, COALESCE(source, '-'), "
    "COALESCE(verdict, '-'), state_after, votes FROM verdicts ORDER BY id",
]


def test_data_moving_migrations_give_the_same_rows(tmp):
    """0001-0003, the same rows, then the rest: 0004's derived flags and token names/roles and
    0007's row come out the same on both engines, and 0010 keeps every verdict row."""
    lite_files, pg_files = migration_files("sqlite"), migration_files("pg")
    split = [i for i, f in enumerate(lite_files) if os.path.basename(f).startswith("0004")][0]
    con = sqlite3.connect(os.path.join(tmp, "data.db"))
    cl = pgfixture.cluster()
    data = cl.new_database("schema_data", template=None)
    for f in lite_files[:split]:
        with open(f, encoding="utf-8") as fh:
            con.executescript(fh.read())
    for f in pg_files[:split]:
        cl.psql(data, file=f)
    for sql in SEED:
        con.execute(sql)
        cl.psql(data, sql)
    con.commit()
    for f in lite_files[split:]:
        with open(f, encoding="utf-8") as fh:
            con.executescript(fh.read())
    for f in pg_files[split:]:
        cl.psql(data, file=f)
    for sql in AFTER:
        lite = [[str(v) for v in r] for r in con.execute(sql)]
        pg = cl.psql(data, sql)
        assert lite and lite == pg, (sql, lite, pg)
    con.close()
    # the flags as 0004 defines them: a on backup and down; b paused with failback noted; c off
    flags = cl.psql(data, AFTER[0])
    assert flags[0][2:] == ["0", "1", "1", "0"] and flags[1][2:] == ["1", "0", "0", "1"], flags
    assert flags[2][2:] == ["0", "0", "0", "0"] and flags[3][2:] == ["0", "0", "1", "0"], flags
    assert len(cl.psql(data, AFTER[3])) == 3


# rows each CHECK or NOT NULL must refuse, on both engines (a good row first, then bad ones)
REFUSED = [
    "INSERT INTO sites (name, failback, created_at, updated_at) VALUES ('x', 'sometimes', 1, 1)",
    "INSERT INTO sites (name, created_at) VALUES ('x', 1)",
    "INSERT INTO origins (site_id, level, address, port, scheme, created_at) "
    "VALUES (1, 17, 'a', 80, 'http', 1)",
    "INSERT INTO origins (site_id, level, address, port, scheme, created_at) "
    "VALUES (1, 1, 'a', 65536, 'http', 1)",
    "INSERT INTO origins (site_id, level, address, port, scheme, created_at) "
    "VALUES (1, 1, 'a', 80, 'ftp', 1)",
    "INSERT INTO origins (site_id, level, address, port, scheme, health, created_at) "
    "VALUES (1, 1, 'a', 80, 'http', 'sick', 1)",
    "INSERT INTO tokens (kind, hash, created_at) VALUES ('root', 'h9', 1)",
    "INSERT INTO tokens (kind, hash, role, created_at) VALUES ('admin', 'h9', 'owner', 1)",
    "INSERT INTO tokens (kind, hash, name, created_at) VALUES ('admin', 'h9', 'dup', 1)",
    "INSERT INTO deliveries (webhook_id, event_id, uuid, state, next_attempt_at, created_at) "
    "VALUES (1, 1, 'u2', 'lost', 1, 1)",
    "INSERT INTO cdnca_meta (id, gen) VALUES (2, 0)",
    "INSERT INTO hostnames (hostname, site_id, position) VALUES ('h.example', 999, 0)",
    "INSERT INTO enrolment_keys (name, hash, created_at, max_uses) VALUES ('k0', 'e0', 1, 0)",
    "INSERT INTO enrolment_keys (name, hash, created_at, max_uses, uses) "
    "VALUES ('k1', 'e1', 1, 2, 3)",
    "INSERT INTO enrolment_keys (name, hash, created_at, uses) VALUES ('k2', 'e2', 1, -1)",
    "INSERT INTO enrolment_keys (name, hash) VALUES ('k3', 'e3')",
]
ACCEPTED = [
    "INSERT INTO sites (name, created_at, updated_at) VALUES ('good', 1, 1)",
    "INSERT INTO origins (site_id, level, address, port, scheme, created_at) "
    "VALUES (1, 16, 'a', 65535, 'https', 1)",
    "INSERT INTO tokens (kind, hash, name, role, created_at) VALUES ('admin', 'h8', 'dup', 'read', 1)",
    "INSERT INTO tokens (kind, hash, name, created_at) VALUES ('node', 'h7', 'dup', 1)",
    "INSERT INTO webhooks (url, secret, created_at) VALUES ('http://x', 's', 1)",
    "INSERT INTO events (type, title, created_at) VALUES ('t', 't', 1)",
    "INSERT INTO deliveries (webhook_id, event_id, uuid, next_attempt_at, created_at) "
    "VALUES (1, 1, 'u1', 1, 1)",
    "INSERT INTO enrolment_keys (name, hash, created_at, max_uses, uses) "
    "VALUES ('kk', 'ee', 1, 2, 2)",
]


def test_constraints_refuse_the_same_rows(tmp):
    con = sqlite3.connect(os.path.join(tmp, "checks.db"))
    con.execute("PRAGMA foreign_keys = ON")  # as controld opens it
    for f in migration_files("sqlite"):
        with open(f, encoding="utf-8") as fh:
            con.executescript(fh.read())
    cl = pgfixture.cluster()
    checks = cl.new_database("schema_checks", template=None)
    for f in migration_files("pg"):
        cl.psql(checks, file=f)
    for sql in ACCEPTED:
        con.execute(sql)
        con.commit()
        cl.psql(checks, sql)
    for sql in REFUSED:
        try:
            con.execute(sql)
            con.commit()
            lite = "accepted"
        except sqlite3.IntegrityError:
            lite = "refused"
        try:
            cl.psql(checks, sql)
            pg = "accepted"
        except pgfixture.PgError:
            pg = "refused"
        assert lite == pg == "refused", (sql, "SQLite " + lite, "PostgreSQL " + pg)
    con.close()


if __name__ == "__main__":
    if not pgfixture.available():
        print("SKIP: no PostgreSQL server binaries (tests/deps.sh installs postgresql)")
        sys.exit(77)
    harness.main()
