/* schema — the SQL migrations compiled into controld (generated from schema/). */
#ifndef CDNCA_SCHEMA_H
#define CDNCA_SCHEMA_H

struct schema_migration {
  int version;      /* from the file name's number */
  const char *name; /* file name */
  const char *sql;
};

extern const struct schema_migration schema_migrations[];
extern const int schema_migrations_count;

#endif
