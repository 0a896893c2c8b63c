/* node — the node record's field table (see node.h). */
#include "node.h"

#include <stddef.h>
#include <stdlib.h>

#define M(m) .offset = offsetof(struct node_rec, m), .size = sizeof(((struct node_rec *)0)->m)
const struct field_def node_fields[] = {
    {.name = "id", .column = "id", .type = FIELD_INT, M(id)},
    {.name = "name",
     .column = "name",
     .type = FIELD_STR,
     .flags = FIELD_REQUIRED,
     M(name),
     .min = 1,
     .check = fields_name_valid,
     .what = FIELDS_NAME_WHAT,
     .forms = FORM_IN},
    {.name = "created_at", .column = "created_at", .type = FIELD_INT, M(created_at)},
    {.name = "last_seen_at", .column = "last_seen_at", .type = FIELD_INT, M(last_seen_at)},
    {.name = "config_seq", .column = "config_seq", .type = FIELD_INT, M(config_seq)},
    {.name = "version", .column = "version", .type = FIELD_STR, M(version)},
    {.name = NULL},
};
#undef M

/* An observation's (site, origin) and its index in the heartbeat. */
struct at {
  int64_t site_id, origin_id;
  int i;
};

static int by_key_then_index(const void *a, const void *b) {
  const struct at *x = a, *y = b;
  if (x->site_id != y->site_id) return x->site_id < y->site_id ? -1 : 1;
  if (x->origin_id != y->origin_id) return x->origin_id < y->origin_id ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

int node_first_repeat(const struct node_obs *obs, int n) {
  struct at *a;
  int first = -1;
  if (n < 2) return -1;
  if (!(a = malloc((size_t)n * sizeof *a))) return -2;
  for (int i = 0; i < n; i++)
    a[i] = (struct at){obs[i].site_id, obs[i].origin_id, i};
  qsort(a, (size_t)n, sizeof *a, by_key_then_index);
  /* in each run of equal keys the later indexes are repeats; the earliest of them is the answer */
  for (int k = 1; k < n; k++)
    if (a[k].site_id == a[k - 1].site_id && a[k].origin_id == a[k - 1].origin_id &&
        (first < 0 || a[k].i < first))
      first = a[k].i;
  free(a);
  return first;
}
