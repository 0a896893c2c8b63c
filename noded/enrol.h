/* enrol — where the node token comes from (docs/design.md#enrolment-keys): the token file in
   the state directory, and enrolment with a key (POST /v1/node/enrol) at a start without a
   token. Neither the key nor the token is ever logged or put in an error text. */
#ifndef CDNCA_ENROL_H
#define CDNCA_ENROL_H

#include <stddef.h>

#include "ctl.h"

/* The token file in the state directory. */
#define ENROL_TOKEN_FILE "node-token"
/* The longest secret (token or key) read. */
#define ENROL_SECRET_MAX 256

/* Pure: 1 when s is a usable secret: 1 to ENROL_SECRET_MAX printable ASCII characters without
   spaces, else 0. */
int enrol_secret_ok(const char *s);

/* Pure: the secret held by a file's text: text without its trailing whitespace (a final newline)
   into out (cap bytes). 0, or -1 when it is no usable secret (enrol_secret_ok). */
int enrol_secret_text(const char *text, size_t len, char *out, size_t cap);

/* Read the node token from dir/node-token into out (cap >= ENROL_SECRET_MAX + 1). 0 when read,
   1 when there is no such file, -1 with err filled (unreadable, or not a token). */
int enrol_token_load(const char *dir, char *out, size_t cap, char *err, size_t errlen);

/* Write token to dir/node-token atomically with mode 0600 (temp file, fsync, rename). 0, or -1
   with err filled. */
int enrol_token_store(const char *dir, const char *token, char *err, size_t errlen);

/* Read the enrolment key from the file at path into out (cap >= ENROL_SECRET_MAX + 1). 0, or -1
   with err filled (naming the option enrol-key-file). */
int enrol_key_load(const char *path, char *out, size_t cap, char *err, size_t errlen);

/* Pure: the node token of a 201 answer of POST /v1/node/enrol into token (cap bytes). 0, or -1
   when the answer holds none. */
int enrol_answer_token(const char *body, size_t len, char *token, size_t cap);

enum enrol_rc {
  ENROL_OK = 0,      /* token filled */
  ENROL_REFUSED = 1, /* controld said no (the key is invalid, the name is taken or bad): why */
  ENROL_STOPPED = 2, /* c->stop was set */
};

/* Enrol as name with key on the controld replicas of c (which carries no token): POST
   /v1/node/enrol until controld answers; an unreachable controld, a 5xx and a garbled 201 are
   retried with the shared backoff (logged). ENROL_OK with the node token in token (cap bytes),
   ENROL_REFUSED with why (whylen bytes) naming controld's answer, or ENROL_STOPPED. */
enum enrol_rc enrol_run(struct ctl *c, const char *key, const char *name, char *token, size_t cap,
                        char *why, size_t whylen);

#endif
