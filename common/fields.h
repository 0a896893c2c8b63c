/* fields — a JSON object validated by a table, one row per field (name, type, bounds, required,
   default), into a C struct; one error vocabulary for every body: unknown_field (400), required,
   invalid_type, out_of_range, too_long, invalid_value (422), each naming the field's path. */
#ifndef CDNCA_FIELDS_H
#define CDNCA_FIELDS_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

struct field_err;

enum field_type {
  FIELD_INT,      /* a JSON integer in [min, max] into an int or int64_t member (size says which) */
  FIELD_BOOL,     /* true/false into an int member */
  FIELD_STR,      /* a string into a char[size] member: length in [min, size - 1], then check */
  FIELD_ENUM,     /* a string among choices into a char[size] member */
  FIELD_INT_LIST, /* an array of at most size integers in [min, max] into an int[] member; the
                     count goes to the int member at count_offset */
  FIELD_TEXT,     /* free text into a char[size] member: valid UTF-8 of min to max characters
                     (code points, not bytes; size must hold 4 * max + 1), no control
                     characters */
  FIELD_NAMED,    /* a word of an enum's name table (names.h: choices, indexed by value, nchoices
                     entries) into an int (enum) member: the record carries the value, every
                     string form (JSON, SQL) the word */
  FIELD_DOUBLE,   /* a JSON number in [min, max] into a double member; FIELD_NULLABLE: null (JSON)
                     and NULL (SQL) stand for 0 */
  FIELD_JSON,     /* a member with a codec of its own (struct field_codec): in JSON its keys sit
                     in the row's object beside the other rows (the row's name is no key); its
                     column holds them as one JSON object text */
};

/* The codec of a FIELD_JSON row: the member's keys, how they are read from and added to a JSON
   object, and its column's text. */
struct field_codec {
  const char *const *keys; /* the keys it reads (NULL-terminated) */
  /* Apply the keys present in obj onto the member: 0, or -1 with err filled (its field relative
     to obj) and the member unchanged. */
  int (*apply)(const cJSON *obj, void *member, struct field_err *err);
  int (*add_json)(cJSON *obj, const void *member); /* 0, or -1 on out of memory */
  /* The column's text (caller frees), or NULL: SQL NULL when is_default, else out of memory. */
  char *(*to_text)(const void *member);
  int (*is_default)(const void *member);
  /* Read the column's text (NULL = the defaults) into the member: 0, or -1 (the member then
     holds the defaults). */
  int (*from_text)(const char *text, void *member);
  /* A FIELD_SECRET row's codec (may be NULL otherwise): mask the member's secret parts with
     FIELDS_MASK in place, returning how many it masked; and, after a write applied a body onto a
     copy of the stored member, put back each stored secret the body echoed as FIELDS_MASK. */
  int (*redact)(void *member);
  void (*keep_secrets)(void *member, const void *stored);
};

enum {
  FIELD_REQUIRED = 1, /* must be present when the caller creates (FIELDS_CREATE) */
  FIELD_NULLABLE = 2, /* FIELD_STR: null stores "" (NULL in SQL); FIELD_DOUBLE: null stores 0;
                         FIELD_INT (a time, an id, a limit): null stores 0, and 0 is null in
                         JSON and NULL in SQL */
  FIELD_LENIENT = 4,  /* a value that does not validate is left out (the member keeps its value)
                         instead of failing the object: a key for people that a reader must never
                         refuse a document for */
  /* Secrets are write-only below the admin role (docs/design.md#secrets): fields_redact masks
     them, fields_keep_secrets keeps a stored secret a write echoes back masked. */
  FIELD_SECRET = 8,      /* STR: the whole value is shown as FIELDS_MASK; JSON: its codec's
                            redact and keep_secrets say which parts */
  FIELD_SECRET_URL = 16, /* STR holding a URL: its userinfo and query (and fragment) are masked,
                            scheme, host, port and path stay (fields_url_mask) */
  /* Who may change a row (docs/design.md#tokens-and-roles): a change of the record by a token of
     the operator role may carry only rows with this flag; every other row needs admin. */
  FIELD_OPERATOR = 32,
};

/* What a masked secret reads as. */
#define FIELDS_MASK "***"

/* One row of a table; a table ends with a row whose name is NULL. */
struct field_def {
  const char *name;
  enum field_type type;
  int flags;
  size_t offset;              /* of the member in the target struct */
  size_t size;                /* INT: sizeof the member (4 or 8); STR/ENUM: the array's size;
                                 INT_LIST: the array's capacity in elements; JSON: the member's
                                 size */
  int64_t min, max;           /* INT, INT_LIST: value bounds; STR: minimum length (max unused) */
  int64_t def;                /* INT: the default fields_defaults writes */
  const char *const *choices; /* ENUM: NULL-terminated */
  int (*check)(char *value);  /* STR: 1 when valid (may normalise in place, e.g. lowercase) */
  const char *what;           /* STR with check, ENUM: what the value must be, in words */
  size_t count_offset;        /* INT_LIST: the int member holding the count */
  /* A table that describes a whole record (one per record: see "Records" below) also says: */
  const char *column; /* its SQL column, NULL when it is not stored in the record's row */
  unsigned forms;     /* FORM_* bits: which forms of the record carry it */
  int nchoices;       /* NAMED: the name table's length */
  const char *object; /* the nested JSON object of the record the row sits in ("health_check"),
                         NULL at the top: fields_json_add writes it there, fields_apply_in reads
                         it from there */
  const struct field_codec *codec; /* JSON */
};

/* The name table of a NAMED row: .choices = table, .nchoices = its length. */
#define FIELD_NAMES(table) .choices = (table), .nchoices = (int)(sizeof(table) / sizeof((table)[0]))

/* The forms of a record a row takes part in (struct field_def.forms). */
enum {
  FORM_IN = 1,      /* an API body may set it */
  FORM_OUT = 2,     /* in the API's JSON of the record */
  FORM_EXPORT = 4,  /* in the export document, and read back on import */
  FORM_CONFIG = 16, /* a configuration column: written by every write of the configuration */
};

/* The member of a struct type for a row: offset and size. */
#define FIELD_AT(type, member) offsetof(type, member), sizeof(((type *)0)->member)

/* A validation failure: the HTTP status to answer, the code, the field path and a message. The
   one error type of every validation (API bodies, health-check options, node_retry, the export
   document). */
struct field_err {
  unsigned status;
  const char *code;
  char field[128];
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

/* fields_apply over the rows that carry form (any FORM_* bit; 0 = every row) and sit at the top
   of the record (no object): the keys of the other rows are unknown_field like any key that is
   no row. */
int fields_apply_form(const cJSON *obj, const struct field_def *defs, unsigned form,
                      const char *const *extra_keys, const char *prefix, unsigned flags,
                      void *target, struct field_err *err);

/* fields_apply_form over the rows of the nested object named object (obj is that object, prefix
   its path). */
int fields_apply_in(const cJSON *obj, const struct field_def *defs, const char *object,
                    unsigned form, const char *const *extra_keys, const char *prefix,
                    unsigned flags, void *target, struct field_err *err);

/* ---- Records: a table with columns and forms is the one description of a record ---- */

/* Add to obj every row of src that carries form, under the row's name: INT and BOOL as numbers
   and booleans, STR/TEXT/ENUM as strings (a FIELD_NULLABLE string that is "" as null; an ENUM that
   is "" as its first choice), NAMED as its word (a value without one as null), INT_LIST as an
   array, DOUBLE as a number (a FIELD_NULLABLE 0 as null), JSON as its codec's keys. A row with an
   object goes into obj's member of that name, an object added at its first row. 0, or -1 when
   memory runs out. */
int fields_json_add(cJSON *obj, const struct field_def *defs, unsigned form, const void *src);

/* The names of the rows that carry form into out[0..cap-1], NULL-terminated (an extra_keys list);
   the count, or -1 when cap is too small. */
int fields_names(const struct field_def *defs, unsigned form, const char **out, int cap);

/* fields_names over the rows that also have every bit of flags (FIELD_*). */
int fields_names_flagged(const struct field_def *defs, unsigned form, int flags, const char **out,
                         int cap);

/* "a, b, c": the columns of the rows with a column that carry form (0 = every column), each
   preceded by prefix (e.g. "t." or ""), in table order, into out; the count, or -1 when cap is too
   small. */
int fields_columns(const struct field_def *defs, unsigned form, const char *prefix, char *out,
                   size_t cap);

/* The pieces of a statement a table's columns make (fields_sql_list). */
enum fields_sql_item {
  FIELDS_SQL_MARKS,        /* "?, ?, ?" */
  FIELDS_SQL_SETS,         /* "a = ?, b = ?" */
  FIELDS_SQL_SETS_NUMBERED /* "a = ?1, b = ?2": numbered from 1 in table order */
};

/* The item for each row with a column that carries form (0 = every column), in table order,
   comma-separated, into out; the count, or -1 when cap is too small. */
int fields_sql_list(const struct field_def *defs, unsigned form, enum fields_sql_item item,
                    char *out, size_t cap);

/* 1 when v is valid UTF-8 of min to max code points with no control character (C0, DEL, C1),
   else 0. */
int fields_text_valid(const char *v, int64_t min, int64_t max);

/* Make s (a string in a buffer of cap bytes) text that fields_text_valid(s, 0, cap - 1) accepts:
   each control byte (C0, DEL) becomes '?', and text still not clean (a C1 control, bad UTF-8)
   is replaced by instead. For words from outside (an origin's, a plugin's) that are shown in the
   dashboard, the incident report and the log. */
void fields_text_scrub(char *s, size_t cap, const char *instead);

/* The rule of names (sites, nodes, API tokens): 1-64 characters of ASCII letters, digits, '.',
   '_' or '-'. 1 when s follows it, else 0; fields_name_valid is the same as a STR row's check. */
int fields_name_ok(const char *s);
int fields_name_valid(char *s);
#define FIELDS_NAME_WHAT "1-64 characters of letters, digits, '.', '_' or '-'"

/* ---- Secrets ---- */

/* Mask every FIELD_SECRET / FIELD_SECRET_URL row of target in place (a record shown to a reader
   below admin); the number of rows or parts masked (0: the record holds no secret). Pure. */
int fields_redact(const struct field_def *defs, void *target);

/* After a write applied a body onto target (a copy of stored), put back every secret of stored
   that target now holds only in its masked form: a FIELD_SECRET string equal to FIELDS_MASK, a
   FIELD_SECRET_URL equal to the mask of the stored URL (and different from it), and what the
   codec's keep_secrets keeps. Pure. */
void fields_keep_secrets(const struct field_def *defs, void *target, const void *stored);

/* The URL url with its userinfo, query and fragment replaced by FIELDS_MASK (user:pw@host:8443
   reads ***@host:8443, /p?k=v#f reads /p?***#***), into out (cap bytes, cut when short). 1 when
   something was masked, 0 when url had nothing to mask (out is then a copy). Pure. */
int fields_url_mask(const char *url, char *out, size_t cap);

/* ---- Copying a record into the struct of another table ---- */

/* The plan of fields_copy: plan[i] is the row of src with the name of dst's row i, for every row
   of dst. The count, or -1 when cap is too small or a row of dst has no row of a compatible type
   in src (INT to INT, BOOL to BOOL, STR, ENUM and TEXT to any of these, INT_LIST to INT_LIST,
   NAMED to NAMED of the same name table, NAMED to STR, ENUM or TEXT as its word); *missing (may
   be NULL) then names that row. */
int fields_match(const struct field_def *dst, const struct field_def *src,
                 const struct field_def **plan, int cap, const char **missing);

/* Write every row of dst into to, read from from through plan (fields_match): an integer, a
   boolean, a string, a list or an enum's value, whatever the sizes of the two members. 0, or -1
   when a value does not fit its member in to (a longer string, an integer beyond an int, more list
   entries): to is then partly written. */
int fields_copy(const struct field_def *dst, void *to, const struct field_def *const *plan,
                const void *from);

/* Write every FIELD_INT row's default into target. */
void fields_defaults(const struct field_def *defs, void *target);

/* The row named name, or NULL. */
const struct field_def *fields_find(const struct field_def *defs, const char *name);

/* Fill err (status, code, path from prefix and key, printf message); returns -1. */
int fields_fail(struct field_err *err, unsigned status, const char *code, const char *prefix,
                const char *key, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#endif
