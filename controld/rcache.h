/* rcache — a small cache of rendered reply bodies, keyed by id and valid for one store generation
 * (thread-safe). */
#ifndef CDNCA_RCACHE_H
#define CDNCA_RCACHE_H

#include <stddef.h>
#include <stdint.h>

struct rcache;

/* New cache with `slots` entries (one per key modulo slots); NULL on OOM. */
struct rcache *rcache_new(int slots);

/* Free every entry and the cache; NULLs *c. */
void rcache_free(struct rcache **c);

/* On a hit for (key, gen): 1 with a malloc'd copy in *out (caller frees), its length and the tag
   it was put with (e.g. the revision for the ETag; tag may be NULL); else 0. */
int rcache_get(struct rcache *c, int64_t key, int64_t gen, char **out, size_t *len, int64_t *tag);

/* Remember body (copied) and tag for (key, gen), replacing what the slot held. */
void rcache_put(struct rcache *c, int64_t key, int64_t gen, const char *body, size_t len,
                int64_t tag);

#endif
