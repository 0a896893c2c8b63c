/* sigmsg — the channels replicas notify each other on and the text of their payloads (pure).
   Written by the store inside a write transaction, read by the listener (signals.h). */
#ifndef CDNCA_SIGMSG_H
#define CDNCA_SIGMSG_H

#include <stddef.h>
#include <stdint.h>

/* The channels. The names are the PostgreSQL channel names (sigmsg_channel). */
enum signal_kind { SIGNAL_PUB = 0, SIGNAL_INVAL, SIGNAL_TASKS, SIGNAL_VOTES, SIGNAL_KINDS };

#define SIGNAL_PAYLOAD_MAX 256 /* longest payload accepted (PostgreSQL allows 8000 bytes) */

/* The channel name of kind ("cdnca_pub", …), or NULL for an unknown kind; the kind of a channel
   name, or -1. */
const char *sigmsg_channel(enum signal_kind kind);
int sigmsg_kind(const char *channel);

/* "seq=<seq> gen=<gen>" into out (cap bytes); the length, or -1 when it does not fit or a value
   is negative. */
int sigmsg_pub_format(char *out, size_t cap, int64_t seq, int64_t gen);

/* Parse a cdnca_pub payload: exactly "seq=<digits> gen=<digits>" (each 0..INT64_MAX, no sign, no
   spaces but the one separator). 0 with *seq, *gen set, or -1 (outputs untouched). */
int sigmsg_pub_parse(const char *payload, int64_t *seq, int64_t *gen);

/* A cdnca_inval payload. */
enum sigmsg_inval {
  SIGMSG_INVAL_BAD = -1,
  SIGMSG_INVAL_TOKENS = 0,
  SIGMSG_INVAL_NODE,
  SIGMSG_INVAL_WEBHOOKS,
  SIGMSG_INVAL_EVENTS
};

/* "node:<id>" into out; the length or -1 (id < 1, or it does not fit). */
int sigmsg_node_format(char *out, size_t cap, int64_t node_id);

/* Parse a cdnca_inval payload: "tokens", "webhooks", "events" or "node:<id>" (id 1..INT64_MAX,
   digits only; *node_id set). Anything else is SIGMSG_INVAL_BAD. */
enum sigmsg_inval sigmsg_inval_parse(const char *payload, int64_t *node_id);

#endif
