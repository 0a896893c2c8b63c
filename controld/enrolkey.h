/* enrolkey — the enrolment key record (docs/design.md#enrolment-keys), its field tables, the
   bodies of POST /v1/enrolment-keys and POST /v1/node/enrol, and the rule of when a key may
   enrol a node. No SQL, no I/O. */
#ifndef CDNCA_ENROLKEY_H
#define CDNCA_ENROLKEY_H

#include <stdint.h>

#include "fields.h"

/* The most uses a key may allow (max_uses); null is unlimited. */
#define ENROLKEY_MAX_USES 1000000
/* The longest key text POST /v1/node/enrol reads (a key is 64 hex digits; anything else is an
   unknown key). */
#define ENROLKEY_TEXT_MAX 256

struct enrolkey_rec {
  int64_t id;
  char name[65];
  int64_t created_at;
  int64_t expires_at; /* wall ms, 0 = never */
  int64_t max_uses;   /* 0 = unlimited */
  int64_t uses;
  int64_t revoked_at; /* wall ms, 0 = live */
};

/* The record's columns (in the order the store reads them; the secret's hash is no row). */
extern const struct field_def enrolkey_fields[];

/* What a key is at a moment. */
enum enrolkey_state {
  ENROLKEY_ACTIVE = 0,
  ENROLKEY_EXPIRED,
  ENROLKEY_USED_UP,
  ENROLKEY_REVOKED,
  ENROLKEY_STATES
};

/* The state's word ("active", "expired", "used_up", "revoked"), indexed by the state. */
extern const char *const enrolkey_state_names[ENROLKEY_STATES];

/* The state of k at now (wall ms): revoked before expired before used up. Pure. */
enum enrolkey_state enrolkey_state(const struct enrolkey_rec *k, int64_t now);

/* The body of POST /v1/enrolment-keys as read. */
struct enrolkey_in {
  char name[65];
  char expires_at[40]; /* RFC 3339, "" = never */
  int64_t max_uses;    /* 0 = unlimited */
};

/* POST /v1/enrolment-keys's field table: name (required), expires_at, max_uses (both nullable). */
extern const struct field_def enrolkey_in_fields[];

/* Turn a validated body into a record to create at now: expires_at read and in the future. 0, or
   -1 with err filled (422 naming expires_at). */
int enrolkey_in_record(const struct enrolkey_in *in, int64_t now, struct enrolkey_rec *out,
                       struct field_err *err);

/* The body of POST /v1/node/enrol as read (key is a secret: wipe it after use). */
struct enrol_in {
  char key[ENROLKEY_TEXT_MAX + 1];
  char name[65];
};

/* POST /v1/node/enrol's field table: key and name, both required. */
extern const struct field_def enrol_in_fields[];

#endif
