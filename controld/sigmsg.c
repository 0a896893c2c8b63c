/* sigmsg — the payloads of the replicas' notification channels (see sigmsg.h). Pure. */
#include "sigmsg.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *const channels[SIGNAL_KINDS] = {"cdnca_pub", "cdnca_inval", "cdnca_tasks",
                                                   "cdnca_votes"};

const char *sigmsg_channel(enum signal_kind kind) {
  if ((int)kind < 0 || kind >= SIGNAL_KINDS) return NULL;
  return channels[kind];
}

int sigmsg_kind(const char *channel) {
  for (int k = 0; channel && k < SIGNAL_KINDS; k++)
    if (strcmp(channel, channels[k]) == 0) return k;
  return -1;
}

int sigmsg_pub_format(char *out, size_t cap, int64_t seq, int64_t gen) {
  int n;
  if (seq < 0 || gen < 0) return -1;
  n = snprintf(out, cap, "seq=%" PRId64 " gen=%" PRId64, seq, gen);
  return n < 0 || (size_t)n >= cap ? -1 : n;
}

/* Digits at *p up to a byte not a digit: 0..INT64_MAX, at least one digit, no sign; advances *p.
   0 or -1. */
static int parse_u63(const char **p, int64_t *out) {
  const char *s = *p;
  int64_t v = 0;
  if (*s < '0' || *s > '9') return -1;
  while (*s >= '0' && *s <= '9') {
    int d = *s - '0';
    if (v > (INT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
    s++;
  }
  *p = s;
  *out = v;
  return 0;
}

int sigmsg_pub_parse(const char *payload, int64_t *seq, int64_t *gen) {
  const char *p = payload;
  int64_t s, g;
  if (!p || strncmp(p, "seq=", 4) != 0) return -1;
  p += 4;
  if (parse_u63(&p, &s) < 0 || strncmp(p, " gen=", 5) != 0) return -1;
  p += 5;
  if (parse_u63(&p, &g) < 0 || *p) return -1;
  *seq = s;
  *gen = g;
  return 0;
}

int sigmsg_node_format(char *out, size_t cap, int64_t node_id) {
  int n;
  if (node_id < 1) return -1;
  n = snprintf(out, cap, "node:%" PRId64, node_id);
  return n < 0 || (size_t)n >= cap ? -1 : n;
}

enum sigmsg_inval sigmsg_inval_parse(const char *payload, int64_t *node_id) {
  const char *p = payload;
  int64_t id;
  if (!p) return SIGMSG_INVAL_BAD;
  if (strcmp(p, "tokens") == 0) return SIGMSG_INVAL_TOKENS;
  if (strcmp(p, "webhooks") == 0) return SIGMSG_INVAL_WEBHOOKS;
  if (strcmp(p, "events") == 0) return SIGMSG_INVAL_EVENTS;
  if (strncmp(p, "node:", 5) != 0) return SIGMSG_INVAL_BAD;
  p += 5;
  if (parse_u63(&p, &id) < 0 || *p || id < 1) return SIGMSG_INVAL_BAD;
  *node_id = id;
  return SIGMSG_INVAL_NODE;
}
