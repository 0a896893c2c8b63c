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

struct at {
  struct node_obs_key k;
  int i;
};

static int by_key_then_index(const void *a, const void *b) {
  const struct at *x = a, *y = b;
  if (x->k.site_id != y->k.site_id) return x->k.site_id < y->k.site_id ? -1 : 1;
  if (x->k.origin_id != y->k.origin_id) return x->k.origin_id < y->k.origin_id ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

int node_first_repeat(const struct node_obs_key *keys, int n) {
  struct at *a;
  int first = -1;
  if (n < 2) return -1;
  if (!(a = malloc((size_t)n * sizeof *a))) return -2;
  for (int i = 0; i < n; i++)
    a[i] = (struct at){keys[i], i};
  qsort(a, (size_t)n, sizeof *a, by_key_then_index);
  /* in each run of equal keys the later indexes are repeats; the earliest of them is the answer */
  for (int k = 1; k < n; k++)
    if (a[k].k.site_id == a[k - 1].k.site_id && a[k].k.origin_id == a[k - 1].k.origin_id &&
        (first < 0 || a[k].i < first))
      first = a[k].i;
  free(a);
  return first;
}
