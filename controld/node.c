/* node — the node record's field table (see node.h). */
#include "node.h"

#include <stddef.h>

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
