/* jsonstrict — RFC 8259 JSON text checked strictly before any parser reads it, so one message can
   never be read two ways: no duplicate keys, no U+0000 in strings, valid UTF-8 only, escaped
   surrogates only in pairs, bounded nesting, nothing after the value. Pure, no allocation beyond
   the duplicate-key scratch. */
#ifndef CDNCA_JSONSTRICT_H
#define CDNCA_JSONSTRICT_H

#include <stddef.h>

/* Nesting allowed (objects and arrays); every API body needs far less. */
#define JSONSTRICT_MAX_DEPTH 32

enum jsonstrict_rc {
  JSONSTRICT_OK = 0,
  JSONSTRICT_SYNTAX = 1,         /* not one JSON value (grammar, trailing bytes, empty) */
  JSONSTRICT_TOO_DEEP = 2,       /* nesting beyond JSONSTRICT_MAX_DEPTH */
  JSONSTRICT_DUPLICATE_KEY = 3,  /* an object has the same key twice (after unescaping) */
  JSONSTRICT_NUL = 4,            /* a string holds U+0000 (\u0000 or a raw NUL byte) */
  JSONSTRICT_BAD_UTF8 = 5,       /* bytes that are not UTF-8 (overlong, surrogate, > U+10FFFF) */
  JSONSTRICT_LONE_SURROGATE = 6, /* a \uD800-\uDFFF escape that is not a high+low pair */
  JSONSTRICT_NO_MEMORY = 7,
  JSONSTRICT_NUMBER = 8, /* a number a double cannot hold (overflows, or > 256 chars) */
};

/* Where a check failed. */
struct jsonstrict_err {
  enum jsonstrict_rc rc;
  size_t offset; /* byte offset of the offending byte */
  char path[96]; /* the value's field path ("origins[1].address", "" = the top level); for a
                    duplicate key, the key's own path; for a bad key, the object's path */
};

/* Check len bytes. 0, or -1 with *err filled (err may be NULL). */
int jsonstrict_check(const char *buf, size_t len, struct jsonstrict_err *err);

/* A short English description of rc ("duplicate key", ...). Static string. */
const char *jsonstrict_message(enum jsonstrict_rc rc);

/* 1 when len bytes are valid UTF-8 (no overlong forms, surrogates or code points > U+10FFFF). */
int jsonstrict_utf8_valid(const char *buf, size_t len);

/* Copy of buf with every byte that is not part of valid UTF-8 replaced by U+FFFD; malloc'd,
   NUL-terminated (caller frees), *out_len set; NULL when out of memory. */
char *jsonstrict_utf8_repair(const char *buf, size_t len, size_t *out_len);

#endif
