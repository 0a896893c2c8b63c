/* fuzz_sigmsg — libFuzzer target: the payloads of notifications between replicas (signals.h).
   The input is a payload text (cut at the first NUL). Whatever sigmsg_pub_parse accepts formats
   back to the same text (leading zeros aside), and so does a node:<id> sigmsg_inval_parse
   accepts; the outputs are untouched on a refusal. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "signals.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  char in[SIGNAL_PAYLOAD_MAX + 1], out[SIGNAL_PAYLOAD_MAX];
  int64_t seq = -1, gen = -1, id = -1;
  if (size > SIGNAL_PAYLOAD_MAX) size = SIGNAL_PAYLOAD_MAX;
  memcpy(in, data, size);
  in[size] = '\0';
  if (sigmsg_pub_parse(in, &seq, &gen) == 0) {
    FUZZ_CHECK(seq >= 0 && gen >= 0);
    FUZZ_CHECK(sigmsg_pub_format(out, sizeof out, seq, gen) > 0);
    /* leading zeros are the only other spelling accepted */
    if (strcmp(in, out) != 0) FUZZ_CHECK(strstr(in, "=0") != NULL);
  } else {
    FUZZ_CHECK(seq == -1 && gen == -1);
  }
  switch (sigmsg_inval_parse(in, &id)) {
  case SIGMSG_INVAL_NODE:
    FUZZ_CHECK(id >= 1);
    FUZZ_CHECK(sigmsg_node_format(out, sizeof out, id) > 0);
    if (strcmp(in, out) != 0) FUZZ_CHECK(strstr(in, ":0") != NULL);
    break;
  case SIGMSG_INVAL_TOKENS:
    FUZZ_CHECK(strcmp(in, "tokens") == 0);
    break;
  case SIGMSG_INVAL_WEBHOOKS:
    FUZZ_CHECK(strcmp(in, "webhooks") == 0);
    break;
  case SIGMSG_INVAL_EVENTS:
    FUZZ_CHECK(strcmp(in, "events") == 0);
    break;
  case SIGMSG_INVAL_BAD:
    FUZZ_CHECK(id == -1);
    break;
  }
  FUZZ_CHECK(sigmsg_kind(in) == -1 || strncmp(in, "cdnca_", 6) == 0);
  return 0;
}
