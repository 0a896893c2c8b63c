/* json — small helpers over cJSON for strict, field-by-field reading. */
#ifndef CDNCA_JSON_H
#define CDNCA_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "jsonstrict.h"

/* Parse exactly len bytes (need not be NUL-terminated) after the strict check of jsonstrict.h
   (duplicate keys, U+0000, invalid UTF-8, lone surrogates, trailing bytes are refused); NULL when
   refused. Caller frees with cJSON_Delete. */
cJSON *json_parse(const char *buf, size_t len);

/* The same, saying why in *err (may be NULL) when it returns NULL. */
cJSON *json_parse_strict(const char *buf, size_t len, struct jsonstrict_err *err);

/* Print compactly; returns a malloc'd string (caller frees with free) or NULL. Always valid
   UTF-8: bytes that are not (a string stored by an older version) become U+FFFD. */
char *json_print(const cJSON *v);

/* Read an integer field. 0 = read into *out, 1 = absent (or null when allow_null), -1 = present but
 * not an integer in [min, max]. */
int json_int(const cJSON *obj, const char *key, int64_t min, int64_t max, int64_t *out);

/* Read a boolean field. 0 = read, 1 = absent, -1 = not a boolean. */
int json_bool(const cJSON *obj, const char *key, int *out);

/* Read a string field (borrowed pointer valid while obj lives). 0 = read, 1 = absent or null, -1 =
 * not a string or longer than maxlen. */
int json_str(const cJSON *obj, const char *key, size_t maxlen, const char **out);

/* 1 when v is a number holding an integer within [min, max]. */
int json_is_int(const cJSON *v, int64_t min, int64_t max);

/* Check that obj only has keys from the NULL-terminated list; on an unknown key returns -1 and sets
 * *bad to it. */
int json_only_keys(const cJSON *obj, const char *const *allowed, const char **bad);

/* The NULL-terminated words as "a, b, c" into out (cap bytes, cut short when it is small; "" for
 * no word), for a message that names them. Returns out. Pure. */
const char *json_words(const char *const *words, char *out, size_t cap);

/* Add an int64 as a JSON number (cJSON prints 15 significant digits: exact below 10^15). Returns
 * the added item or NULL. */
cJSON *json_add_i64(cJSON *obj, const char *key, int64_t v);

/* Add a string, or null when s is NULL. */
cJSON *json_add_str_or_null(cJSON *obj, const char *key, const char *s);

/* Add an RFC 3339 UTC timestamp from wall ms, or null when ms <= 0. */
cJSON *json_add_time(cJSON *obj, const char *key, int64_t wall_ms);

#endif
