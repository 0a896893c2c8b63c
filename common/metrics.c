/* metrics — a small registry, linear lookup under one mutex (tens of series). */
#include "metrics.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define HIST_NB 12
static const double hist_bounds[HIST_NB] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                            0.5,   1,    2.5,   5,    10,  60};

struct series {
  char *labels;
  double value;             /* counter / gauge; histogram sum */
  unsigned long long count; /* histogram */
  unsigned long long buckets[HIST_NB];
  struct series *next;
};

struct family {
  char *name;
  char *type;
  char *help;
  struct series *series;
  struct family *next;
};

struct metrics {
  pthread_mutex_t mu;
  struct family *families, *last;
};

struct metrics *metrics_new(void) {
  struct metrics *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  pthread_mutex_init(&m->mu, NULL);
  return m;
}

void metrics_free(struct metrics **mp) {
  struct metrics *m = *mp;
  if (!m) return;
  for (struct family *f = m->families, *fn; f; f = fn) {
    fn = f->next;
    for (struct series *s = f->series, *sn; s; s = sn) {
      sn = s->next;
      free(s->labels);
      free(s);
    }
    free(f->name);
    free(f->type);
    free(f->help);
    free(f);
  }
  pthread_mutex_destroy(&m->mu);
  free(m);
  *mp = NULL;
}

/* Find or create a family; caller holds the lock. */
static struct family *family_get(struct metrics *m, const char *name, const char *type,
                                 const char *help) {
  struct family *f;
  for (f = m->families; f; f = f->next)
    if (strcmp(f->name, name) == 0) {
      if (help && !f->help) f->help = strdup(help);
      return f;
    }
  f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->name = strdup(name);
  f->type = strdup(type);
  f->help = help ? strdup(help) : NULL;
  if (m->last)
    m->last->next = f;
  else
    m->families = f;
  m->last = f;
  return f;
}

static struct series *series_get(struct family *f, const char *labels) {
  struct series *s, **tail = &f->series;
  for (s = f->series; s; s = s->next) {
    if (strcmp(s->labels, labels) == 0) return s;
    tail = &s->next;
  }
  s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->labels = strdup(labels);
  *tail = s;
  return s;
}

void metrics_declare(struct metrics *m, const char *name, const char *type, const char *help) {
  pthread_mutex_lock(&m->mu);
  family_get(m, name, type, help);
  pthread_mutex_unlock(&m->mu);
}

static void update(struct metrics *m, const char *name, const char *type, const char *labels,
                   double v, int mode) {
  struct family *f;
  struct series *s;
  pthread_mutex_lock(&m->mu);
  f = family_get(m, name, type, NULL);
  s = f ? series_get(f, labels ? labels : "") : NULL;
  if (s) {
    if (mode == 0) {
      s->value += v;
    } else if (mode == 1) {
      s->value = v;
    } else {
      s->value += v;
      s->count++;
      for (int i = 0; i < HIST_NB; i++)
        if (v <= hist_bounds[i]) s->buckets[i]++;
    }
  }
  pthread_mutex_unlock(&m->mu);
}

void metrics_add(struct metrics *m, const char *name, const char *labels, double v) {
  update(m, name, "counter", labels, v, 0);
}

void metrics_set(struct metrics *m, const char *name, const char *labels, double v) {
  update(m, name, "gauge", labels, v, 1);
}

void metrics_observe(struct metrics *m, const char *name, const char *labels, double v) {
  update(m, name, "histogram", labels, v, 2);
}

int metrics_render(struct metrics *m, struct buf *out) {
  int rc = 0;
  pthread_mutex_lock(&m->mu);
  for (struct family *f = m->families; f && rc == 0; f = f->next) {
    if (f->help) rc |= buf_printf(out, "# HELP %s %s\n", f->name, f->help);
    rc |= buf_printf(out, "# TYPE %s %s\n", f->name, f->type);
    for (struct series *s = f->series; s && rc == 0; s = s->next) {
      const char *sep = s->labels[0] ? "," : "";
      if (strcmp(f->type, "histogram") == 0) {
        for (int i = 0; i < HIST_NB; i++)
          rc |= buf_printf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", f->name, s->labels, sep,
                           hist_bounds[i], s->buckets[i]);
        rc |=
            buf_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", f->name, s->labels, sep, s->count);
        rc |= buf_printf(out, "%s_sum%s%s%s %.6f\n", f->name, s->labels[0] ? "{" : "", s->labels,
                         s->labels[0] ? "}" : "", s->value);
        rc |= buf_printf(out, "%s_count%s%s%s %llu\n", f->name, s->labels[0] ? "{" : "", s->labels,
                         s->labels[0] ? "}" : "", s->count);
      } else if (s->labels[0]) {
        rc |= buf_printf(out, "%s{%s} %.17g\n", f->name, s->labels, s->value);
      } else {
        rc |= buf_printf(out, "%s %.17g\n", f->name, s->value);
      }
    }
  }
  pthread_mutex_unlock(&m->mu);
  return rc ? -1 : 0;
}
