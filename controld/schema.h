/* schema — the SQL migrations compiled into controld, one table per dialect (generated from
   schema/sqlite/ and schema/pg/; both dialects carry the same numbers and end with the same
   tables and columns). */
#ifndef CDNCA_SCHEMA_H
#define CDNCA_SCHEMA_H

struct schema_migration {
  int version;      /* from the file name's number */
  const char *name; /* file name */
  const char *sql;
};

/* SQLite (schema/sqlite/), in version order. */
extern const struct schema_migration schema_migrations[];
extern const int schema_migrations_count;

/* PostgreSQL (schema/pg/), in version order. */
extern const struct schema_migration schema_pg_migrations[];
extern const int schema_pg_migrations_count;

#endif
