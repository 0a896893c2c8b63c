/* audit — what an audit record says about an accepted /v1 write (pure): the one-line summary and
   the site it concerns, from the method, the path, the request body and the answer. */
#ifndef CDNCA_AUDIT_H
#define CDNCA_AUDIT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* Write into out (cap bytes, always terminated; cut with "..." when longer) a line such as
   "created site 3 (shop): name=shop, hostnames, origins", "changed origin 7 of site 3:
   enabled=false", "deleted token 4", "switch site 3: level=2", and for POST /v1/node/enrol
   "enrolled node 8 (edge-1) with enrolment key 2 (fleet)" from the reply. body and reply may be
   NULL. Scalar values are shown (strings up to 40 bytes), objects and arrays by their key only,
   and the values of secret-bearing keys (secret, token, password, key) never. */
void audit_summary(const char *method, const char *path, const cJSON *body, const cJSON *reply,
                   char *out, size_t cap);

/* The site a write concerns: the id after /v1/sites/ in path, else for a POST /v1/sites the
   reply's "id"; 0 when none. */
int64_t audit_site_id(const char *path, const cJSON *reply);

#endif
