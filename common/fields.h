/* fields — a JSON object validated by a table, one row per field (name, type, bounds, required,
   default), into a C struct; one error vocabulary for every body: unknown_field (400), required,
   invalid_type, out_of_range, too_long, invalid_value (422), each naming the field's path. */
#ifndef CDNCA_FIELDS_H
#define CDNCA_FIELDS_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

enum field_type {
  FIELD_INT,      /* a JSON integer in [min, max] into an int or int64_t member (size says which) */
  FIELD_BOOL,     /* true/false into an int member */
  FIELD_STR,      /* a string into a char[size] member: length in [min, size - 1], then check */
  FIELD_ENUM,     /* a string among choices into a char[size] member */
  FIELD_INT_LIST, /* an array of at most size integers in [min, max] into an int[] member; the
                     count goes to the int member at count_offset */
};

enum {
  FIELD_REQUIRED = 1, /* must be present when the caller creates (FIELDS_CREATE) */
  FIELD_NULLABLE = 2, /* FIELD_STR: null stores "" */
};

/* One row of a table; a table ends with a row whose name is NULL. */
struct field_def {
  const char *name;
  enum field_type type;
  int flags;
  size_t offset;              /* of the member in the target struct */
  size_t size;                /* INT: sizeof the member (4 or 8); STR/ENUM: the array's size;
                                 INT_LIST: the array's capacity in elements */
  int64_t min, max;           /* INT, INT_LIST: value bounds; STR: minimum length (max unused) */
  int64_t def;                /* INT: the default fields_defaults writes */
  const char *const *choices; /* ENUM: NULL-terminated */
  int (*check)(char *value);  /* STR: 1 when valid (may normalise in place, e.g. lowercase) */
  const char *what;           /* STR with check, ENUM: what the value must be, in words */
  size_t count_offset;        /* INT_LIST: the int member holding the count */
};

/* The member of a struct type for a row: offset and size. */
#define FIELD_AT(type, member) offsetof(type, member), sizeof(((type *)0)->member)

/* A validation failure: the HTTP status to answer, the code, the field path and a message. */
struct field_err {
  unsigned status;
  const char *code;
  char field[96];
  char message[256];
};

enum {
  FIELDS_CREATE = 1,        /* enforce FIELD_REQUIRED */
  FIELDS_ALLOW_UNKNOWN = 2, /* ignore keys not in the table (a newer peer may send more) */
};

/* Check obj against defs and write every present field into target. Keys that are neither rows
   nor in extra_keys (NULL-terminated, may be NULL: members the caller reads itself) are
   unknown_field unless FIELDS_ALLOW_UNKNOWN. prefix is the object's path ("" at the top).
   0, or -1 with *err filled (target may be partly written: validate into a copy). */
int fields_apply(const cJSON *obj, const struct field_def *defs, const char *const *extra_keys,
                 const char *prefix, unsigned flags, void *target, struct field_err *err);

/* Write every FIELD_INT row's default into target. */
void fields_defaults(const struct field_def *defs, void *target);

/* The row named name, or NULL. */
const struct field_def *fields_find(const struct field_def *defs, const char *name);

/* Fill err (status, code, path from prefix and key, printf message); returns -1. */
int fields_fail(struct field_err *err, unsigned status, const char *code, const char *prefix,
                const char *key, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#endif
