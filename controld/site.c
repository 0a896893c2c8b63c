/* site — the site and origin records' pure helpers. */
#include <stdlib.h>
#include <string.h>

#include "site.h"

void site_rec_defaults(struct site_rec *s) {
  struct skip_params nr;
  memset(s, 0, sizeof *s);
  memcpy(s->failback, "auto", 5);
  memcpy(s->hc_path, "/", 2);
  s->hc_timeout_ms = 5000;
  s->hc_unhealthy_after = 3;
  s->hc_healthy_after = 2;
  hcheck_defaults(&s->hc);
  skip_params_default(&nr);
  site_rec_set_retry(s, &nr);
  s->current_level = 1;
  s->config_version = 1;
}

void site_rec_retry(const struct site_rec *s, struct skip_params *p) {
  skip_params_default(p);
  p->retries = (int)s->nr_retries;
  p->retry_budget_ms = s->nr_retry_budget_ms;
  p->fail_count = (int)s->nr_fail_count;
  p->fail_window_ms = s->nr_fail_window_ms;
  p->skip_ms = s->nr_skip_ms;
  p->half_open_requests = (int)s->nr_half_open_requests;
  p->n_retry_on_status = 0;
  for (int i = 0; i < s->n_retry_on_status && i < SKIP_MAX_STATUS; i++)
    p->retry_on_status[p->n_retry_on_status++] = s->retry_on_status[i];
  p->backup_levels = s->nr_backup_levels;
  p->failure_ratio = s->nr_failure_ratio;
  p->failure_min_volume = (int)s->nr_failure_min_volume;
}

void site_rec_set_retry(struct site_rec *s, const struct skip_params *p) {
  s->nr_retries = p->retries;
  s->nr_retry_budget_ms = p->retry_budget_ms;
  s->nr_fail_count = p->fail_count;
  s->nr_fail_window_ms = p->fail_window_ms;
  s->nr_skip_ms = p->skip_ms;
  s->nr_half_open_requests = p->half_open_requests;
  s->n_retry_on_status = 0;
  for (int i = 0; i < p->n_retry_on_status && i < SITE_MAX_RETRY_STATUS; i++)
    s->retry_on_status[s->n_retry_on_status++] = p->retry_on_status[i];
  s->nr_backup_levels = p->backup_levels;
  s->nr_failure_ratio = p->failure_ratio;
  s->nr_failure_min_volume = p->failure_min_volume;
}

int site_rec_copy(struct site_rec *dst, const struct site_rec *src) {
  *dst = *src;
  dst->origins = NULL;
  if (src->n_origins) {
    dst->origins = malloc((size_t)src->n_origins * sizeof *dst->origins);
    if (!dst->origins) {
      dst->n_origins = 0;
      return -1;
    }
    memcpy(dst->origins, src->origins, (size_t)src->n_origins * sizeof *dst->origins);
  }
  return 0;
}

void site_rec_fini(struct site_rec *s) {
  free(s->origins);
  s->origins = NULL;
  s->n_origins = 0;
}
