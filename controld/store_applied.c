/* store_applied — the propagation rows' reader (see store_applied.h). */
#include "store_applied.h"

#include <stddef.h>

#include "store_core.h"

#define AR(m)                                                                                      \
  .offset = offsetof(struct applied_row, m), .size = sizeof(((struct applied_row *)0)->m)
static const struct field_def applied_cols[] = {
    {.name = "seq", .column = "a.seq", .type = FIELD_INT, AR(seq)},
    {.name = "published_at", .column = "p.created_at", .type = FIELD_INT, AR(published_at)},
    {.name = "node_id", .column = "a.node_id", .type = FIELD_INT, AR(node_id)},
    {.name = "applied_at", .column = "a.applied_at", .type = FIELD_INT, AR(applied_at)},
    {.name = "node_name", .column = "a.node_name", .type = FIELD_STR, AR(node_name)},
    {.name = NULL},
};
#undef AR

enum store_rc store_applied_rows(struct store *st, enum applied_of of, int64_t id,
                                 struct applied_row **out, int *n) {
  /* one prepared statement per table */
  static struct store_sql q_incident, q_drill;
  if (of == APPLIED_OF_DRILL)
    return store_select(st, &q_drill, applied_cols,
                        " FROM drill_applied a JOIN publications p ON p.seq = a.seq "
                        "WHERE a.drill_id = ? ORDER BY a.seq, a.applied_at, a.node_id",
                        sizeof **out, 0, (void **)out, n, "reading a drill's propagation", "I", id);
  return store_select(st, &q_incident, applied_cols,
                      " FROM incident_applied a JOIN publications p ON p.seq = a.seq "
                      "WHERE a.incident_id = ? ORDER BY a.seq, a.applied_at, a.node_id",
                      sizeof **out, 0, (void **)out, n, "reading an incident's propagation", "I",
                      id);
}
