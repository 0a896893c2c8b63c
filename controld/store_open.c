/* store_open — a store with its features: the core's connection and migrations, then every
   feature's transaction participant, in the order their hooks must run (see store.h). */
#include "store.h"

#include "store_audit.h"
#include "store_core.h"
#include "store_events.h"
#include "store_lease.h"
#include "store_pub.h"
#include "store_signal.h"
#include "store_tokens.h"

/* The participants, in order: the lease's fence is checked before anything else is written; the
   publication's seq is read before the notifications that carry it; events are written before
   the signal that announces them; the audit log holds only its retention; the signals go last,
   when every fact they report is known. */
static int (*const attach[])(struct store *st) = {
    store_lease_attach,  store_pub_attach,   store_events_attach,
    store_tokens_attach, store_audit_attach, store_signal_attach,
};

struct store *store_open(const char *path) {
  struct store *st = store_core_open(path);
  if (!st) return NULL;
  for (size_t i = 0; i < sizeof attach / sizeof attach[0]; i++) {
    if (attach[i](st) < 0) {
      store_close(&st);
      return NULL;
    }
  }
  return st;
}
