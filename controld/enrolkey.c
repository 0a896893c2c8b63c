/* enrolkey — the enrolment key record, its tables and rule (see enrolkey.h). */
#include "enrolkey.h"

#include <stddef.h>
#include <string.h>

#include "clock.h"

const char *const enrolkey_state_names[ENROLKEY_STATES] = {
    [ENROLKEY_ACTIVE] = "active",
    [ENROLKEY_EXPIRED] = "expired",
    [ENROLKEY_USED_UP] = "used_up",
    [ENROLKEY_REVOKED] = "revoked",
};

#define M(m)                                                                                       \
  .offset = offsetof(struct enrolkey_rec, m), .size = sizeof(((struct enrolkey_rec *)0)->m)
const struct field_def enrolkey_fields[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, M(id)},
    {.name = "name", .column = "name", .type = FIELD_STR, M(name)},
    {.name = "created_at", .column = "created_at", .type = FIELD_INT, M(created_at)},
    {.name = "expires_at",
     .column = "expires_at",
     .type = FIELD_INT,
     .flags = FIELD_NULLABLE,
     M(expires_at)},
    {.name = "max_uses",
     .column = "max_uses",
     .type = FIELD_INT,
     .flags = FIELD_NULLABLE,
     M(max_uses)},
    {.name = "uses", .column = "uses", .type = FIELD_INT, M(uses)},
    {.name = "revoked_at",
     .column = "revoked_at",
     .type = FIELD_INT,
     .flags = FIELD_NULLABLE,
     M(revoked_at)},
    {.name = NULL},
};
#undef M

enum enrolkey_state enrolkey_state(const struct enrolkey_rec *k, int64_t now) {
  if (k->revoked_at > 0) return ENROLKEY_REVOKED;
  if (k->expires_at > 0 && k->expires_at <= now) return ENROLKEY_EXPIRED;
  if (k->max_uses > 0 && k->uses >= k->max_uses) return ENROLKEY_USED_UP;
  return ENROLKEY_ACTIVE;
}

/* An RFC 3339 time (the check of expires_at). */
static int time_valid(char *s) {
  int64_t ms;
  return clock_parse_iso(s, &ms) == 0;
}

#define I(m) .offset = offsetof(struct enrolkey_in, m), .size = sizeof(((struct enrolkey_in *)0)->m)
const struct field_def enrolkey_in_fields[] = {
    {.name = "name",
     .type = FIELD_STR,
     .flags = FIELD_REQUIRED,
     I(name),
     .min = 1,
     .check = fields_name_valid,
     .what = FIELDS_NAME_WHAT},
    {.name = "expires_at",
     .type = FIELD_STR,
     .flags = FIELD_NULLABLE,
     I(expires_at),
     .min = 1,
     .check = time_valid,
     .what = "an RFC 3339 time such as 2027-01-31T00:00:00Z, or null"},
    {.name = "max_uses",
     .type = FIELD_INT,
     .flags = FIELD_NULLABLE,
     I(max_uses),
     .min = 1,
     .max = ENROLKEY_MAX_USES},
    {.name = NULL},
};
#undef I

int enrolkey_in_record(const struct enrolkey_in *in, int64_t now, struct enrolkey_rec *out,
                       struct field_err *err) {
  memset(out, 0, sizeof *out);
  memcpy(out->name, in->name, sizeof out->name);
  out->max_uses = in->max_uses;
  if (in->expires_at[0]) {
    if (clock_parse_iso(in->expires_at, &out->expires_at) < 0)
      return fields_fail(err, 422, "invalid_value", "", "expires_at",
                         "expires_at must be an RFC 3339 time such as 2027-01-31T00:00:00Z, or "
                         "null");
    if (out->expires_at <= now)
      return fields_fail(err, 422, "invalid_value", "", "expires_at",
                         "expires_at must be in the future");
  }
  return 0;
}

#define E(m) .offset = offsetof(struct enrol_in, m), .size = sizeof(((struct enrol_in *)0)->m)
const struct field_def enrol_in_fields[] = {
    {.name = "key", .type = FIELD_STR, .flags = FIELD_REQUIRED, E(key), .min = 1},
    {.name = "name",
     .type = FIELD_STR,
     .flags = FIELD_REQUIRED,
     E(name),
     .min = 1,
     .check = fields_name_valid,
     .what = FIELDS_NAME_WHAT},
    {.name = NULL},
};
#undef E
