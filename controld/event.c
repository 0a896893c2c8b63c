/* event — the name table of a webhook delivery's state (see event.h). */
#include "event.h"

const char *const delivery_state_names[DELIVERY_STATES] = {
    [DELIVERY_PENDING] = "pending",
    [DELIVERY_DELIVERED] = "delivered",
    [DELIVERY_FAILED] = "failed",
};
