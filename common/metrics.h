/* metrics — labelled counters, gauges and histograms rendered as Prometheus text (thread-safe). */
#ifndef CDNCA_METRICS_H
#define CDNCA_METRICS_H

#include "buf.h"

struct metrics;

/* New empty registry; NULL on OOM. Free with metrics_free. */
struct metrics *metrics_new(void);
void metrics_free(struct metrics **m);

/* Declare a family (name, help, "counter"|"gauge"|"histogram") so it renders even before any
 * sample. */
void metrics_declare(struct metrics *m, const char *name, const char *type, const char *help);

/* Add v to the counter name{labels} (labels like `route="/v1/sites",code="200"`, or "" for none).
 */
void metrics_add(struct metrics *m, const char *name, const char *labels, double v);

/* Set the gauge name{labels} to v. */
void metrics_set(struct metrics *m, const char *name, const char *labels, double v);

/* Observe v in the histogram name (fixed buckets in seconds: 0.005 .. 60). */
void metrics_observe(struct metrics *m, const char *name, const char *labels, double v);

/* Append the whole registry in Prometheus text format to out. 0 or -1. */
int metrics_render(struct metrics *m, struct buf *out);

#endif
