/* store_applied — the propagation rows' reader (see store_applied.h). */
#include "store_applied.h"

#include <stddef.h>

#include "store_core.h"

#define AR(m)                                                                                      \
  .offset = offsetof(struct applied_row, m), .size = sizeof(((struct applied_row *)0)->m)
/* a row, with its rank among its seq's rows and their count (0 and 0: every row is read) */
static const struct field_def ranked_cols[] = {
    {.name = "seq", .column = "a.seq", .type = FIELD_INT, AR(seq)},
    {.name = "published_at", .column = "p.created_at", .type = FIELD_INT, AR(published_at)},
    {.name = "node_id", .column = "a.node_id", .type = FIELD_INT, AR(node_id)},
    {.name = "applied_at", .column = "a.applied_at", .type = FIELD_INT, AR(applied_at)},
    {.name = "node_name", .column = "a.node_name", .type = FIELD_STR, AR(node_name)},
    {.name = "rank", .column = "a.up", .type = FIELD_INT, AR(rank)},
    {.name = "count", .column = "a.n", .type = FIELD_INT, AR(count)},
    {.name = NULL},
};
#undef AR

enum store_rc store_applied_rows(struct store *st, enum applied_of of, int64_t id,
                                 struct applied_row **out, int *n) {
  /* one prepared statement per table */
  static struct store_sql q_incident, q_drill;
  if (of == APPLIED_OF_DRILL)
    return store_select(st, &q_drill, ranked_cols,
                        " FROM (SELECT seq, node_id, applied_at, node_name, 0 AS up, 0 AS n FROM "
                        "drill_applied WHERE drill_id = ?) a JOIN publications p ON p.seq = a.seq "
                        "ORDER BY a.seq, a.applied_at, a.node_id",
                        sizeof **out, 0, (void **)out, n, "reading a drill's propagation", "I", id);
  /* an incident's switch may have been applied by every node of a fleet: its slowest
     INCIDENT_PROP_NODES_MAX rows and its median one, each with its rank and the count */
  return store_select(
      st, &q_incident, ranked_cols,
      " FROM (SELECT seq, node_id, applied_at, node_name, ROW_NUMBER() OVER (PARTITION BY seq "
      "ORDER BY applied_at, node_id) AS up, COUNT(*) OVER (PARTITION BY seq) AS n FROM "
      "incident_applied WHERE incident_id = ?) a JOIN publications p ON p.seq = a.seq WHERE a.up "
      "> a.n - " STORE_SQL_NUM(INCIDENT_PROP_NODES_MAX) " OR a.up = (a.n - 1) / 2 + 1 ORDER BY "
                                                        "a.seq, a.applied_at, a.node_id",
      sizeof **out, 0, (void **)out, n, "reading an incident's propagation", "I", id);
}
