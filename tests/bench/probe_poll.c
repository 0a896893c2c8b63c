/* probe_poll — the curl_multi_perform + curl_multi_poll loop (see probe_poll.h). */
#include "probe_poll.h"

#include "log.h"
#include "probe.h"

#include <curl/curl.h>

int probe_poll_turn(struct probe *p, void *multi, int more_to_start, int wait_ms) {
  CURLM *m = multi;
  int still = 0, idle = 0, in_flight;
  CURLMcode mc = curl_multi_perform(m, &still);
  if (mc != CURLM_OK) {
    log_error("curl_multi_perform: %s", curl_multi_strerror(mc));
    return -1;
  }
  in_flight = probe_loop_collect(p, &idle);
  if (idle > 0 && more_to_start) return 0; /* room for more: start them before waiting */
  if (in_flight == 0) return 0;
  mc = curl_multi_poll(m, NULL, 0, wait_ms, NULL);
  if (mc != CURLM_OK) {
    log_error("curl_multi_poll: %s", curl_multi_strerror(mc));
    return -1;
  }
  return 0;
}

int probe_poll_use(struct probe *p) {
  return probe_set_loop(p, probe_poll_turn);
}
