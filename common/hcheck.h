/* hcheck — a site's health-check options (what "healthy" means for its origins): their JSON
 * form, validation, and the one success rule nodes, checkpoints and controld judge by. Pure. */
#ifndef CDNCA_HCHECK_H
#define CDNCA_HCHECK_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "fields.h"

/* Extra request headers per check: HAProxy and nginx users rarely need more than a few (a
 * token, an X-Forwarded-Proto); the cap keeps a task message and the curl header list small. */
#define HCHECK_MAX_HEADERS 8
#define HCHECK_HEADER_NAME_MAX 64
#define HCHECK_HEADER_VALUE_MAX 256
/* Codes and ranges in expected_codes ("200-299", "301", ...). */
#define HCHECK_MAX_CODES 16
/* expected_body is a marker string, not a document: 256 bytes is plenty and bounds the search. */
#define HCHECK_EXPECTED_BODY_MAX 256
/* Only the first 64 KiB of a body is searched (and kept by the probe): a health page is small,
 * and a probe must not read an origin's large answer at 100,000 sites a round. */
#define HCHECK_BODY_MAX (64 * 1024)
/* interval_ms bounds: a check more often than once a second is load, not health. */
#define HCHECK_INTERVAL_MIN_MS 1000
#define HCHECK_INTERVAL_MAX_MS 86400000
/* level_min_healthy bound (a level cannot hold more origins than a site). */
#define HCHECK_MIN_HEALTHY_MAX 64
#define HCHECK_EVIDENCE_MAX 128

enum hcheck_type { HCHECK_HTTP = 0, HCHECK_TCP = 1 };
enum hcheck_method { HCHECK_GET = 0, HCHECK_HEAD = 1 };

struct hcheck_header {
  char name[HCHECK_HEADER_NAME_MAX + 1];
  char value[HCHECK_HEADER_VALUE_MAX + 1];
};

/* An inclusive range of statuses; a single code has lo == hi. */
struct hcheck_range {
  int lo, hi;
};

/* The options; plain data. Every default keeps the seed's rule exactly. */
struct hcheck_opts {
  enum hcheck_type type;     /* [http] */
  enum hcheck_method method; /* [GET] */
  int n_headers;             /* [0] */
  struct hcheck_header headers[HCHECK_MAX_HEADERS];
  int n_codes; /* [0] = no expected_codes: status < 500 is a success */
  struct hcheck_range codes[HCHECK_MAX_CODES];
  char expected_body[HCHECK_EXPECTED_BODY_MAX + 1]; /* [""] = none */
  int port;                                         /* [0] = the origin's port */
  int64_t interval_ms;                              /* [0] = the global probe interval */
  int level_min_healthy;                            /* [1] */
};

/* Set o to the defaults. */
void hcheck_defaults(struct hcheck_opts *o);

/* Apply the option keys present in obj onto o (absent keys keep o's values; null resets a
 * nullable option to its default), then check the whole: 0, or -1 with err filled and o
 * unchanged. Other keys of obj are ignored. */
int hcheck_apply_json(const cJSON *obj, struct hcheck_opts *o, struct field_err *err);

/* Add every option to obj as the API shows them (defaults included: null, {}, "GET"...). with_site
 * = 0 leaves out interval_ms and level_min_healthy (the probe options only: node tasks and
 * checkpoint requests). 0, or -1 on out of memory. */
int hcheck_add_json(cJSON *obj, const struct hcheck_opts *o, int with_site);

/* 1 when every option has its default (the seed's rule exactly). */
int hcheck_is_default(const struct hcheck_opts *o);

/* The options as one compact JSON object text for storage; NULL for all defaults. Caller frees. */
char *hcheck_to_text(const struct hcheck_opts *o);

/* Read stored text (NULL or "" = defaults) into o; 0, or -1 (o = defaults) when it does not
 * validate. */
int hcheck_from_text(const char *text, struct hcheck_opts *o);

/* The options as a record's FIELD_JSON row (fields.h): their keys (as the API shows them, with
 * interval_ms and level_min_healthy) in the record's health_check object, hcheck_to_text's text
 * in its column. */
extern const struct field_codec hcheck_codec;

/* Secrets (docs/design.md#secrets): header values are write-only below admin. hcheck_redact masks
   every header value with FIELDS_MASK (the names stay) and returns how many it masked;
   hcheck_keep_secrets gives each header of o whose value is FIELDS_MASK the value of the stored
   header of the same name (case-insensitive), when there is one. Pure. */
int hcheck_redact(struct hcheck_opts *o);
void hcheck_keep_secrets(struct hcheck_opts *o, const struct hcheck_opts *stored);

/* 1 when status is accepted by o (expected_codes, else status < 500), else 0. */
int hcheck_status_ok(const struct hcheck_opts *o, int status);

/* What one probe saw. */
struct hcheck_outcome {
  int connected;     /* 1 once the connection (TLS included for https) was established */
  int timed_out;     /* the probe ran out of time */
  int status;        /* status of the final response, 0 when none */
  const char *error; /* the transport failure in words when there is no response ("connect
                        failed: Connection refused", "tls: ..."); NULL or "" = none known */
  const char *body;  /* the body's first body_len bytes (at most HCHECK_BODY_MAX); may be NULL */
  size_t body_len;
};

/* The success rule: 1 (success, evidence "") or 0 (failure, evidence says which rule failed:
 * "connect timeout", "timeout", the transport error, "status 503" (the default rule),
 * "unexpected status 403" (expected_codes), "body mismatch"). tcp: success = connected.
 * evidence gets at most cap bytes, NUL included. */
int hcheck_judge(const struct hcheck_opts *o, const struct hcheck_outcome *out, char *evidence,
                 size_t cap);

/* Re-judge a vote reported by someone else (a checkpoint plugin) against o: ok, status (0 =
 * none) and error are what the vote said. Returns the verdict; evidence (cap bytes, NUL
 * included) gets "" on success, else which rule failed. The rule:
 * - no status (0, or outside 100..999), or a tcp check: the vote's ok stands (no response to
 *   judge; a tcp check sends no request); evidence = its error ("failed" when it gave none);
 * - a status o rejects (expected_codes, else >= 500): failure, whatever the vote's ok, with the
 *   evidence hcheck_judge gives ("status 503", "unexpected status 403");
 * - a status o accepts and an expected_body: the vote's ok stands (only the voter saw the body);
 * - a status o accepts and no expected_body: success, whatever the vote's ok (the status is the
 *   whole rule, as for controld's own probes). */
int hcheck_rejudge(const struct hcheck_opts *o, int ok, int status, const char *error,
                   char *evidence, size_t cap);

/* "http" | "tcp", "GET" | "HEAD". Static. */
const char *hcheck_type_to_string(enum hcheck_type t);
const char *hcheck_method_to_string(enum hcheck_method m);

#endif
