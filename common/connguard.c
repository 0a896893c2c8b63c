/* connguard — per-address caps and request-head deadlines for HTTP listeners (connguard.h). */
#include "connguard.h"

#include <arpa/inet.h>
#include <linux/tcp.h> /* tcpi_bytes_received, which glibc's struct tcp_info lacks */
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

#define NBUCKETS 1024
#define KEY_MAX 64
#define SWEEP_MS 100

struct ipcount {
  char key[KEY_MAX];
  int n;
  struct ipcount *next;
};

struct gconn {
  int fd;
  int head_done;
  uint64_t requests; /* done on this connection */
  int64_t head_start;
  int rx_known;          /* rx_at_answer is the kernel's count (TCP) */
  uint64_t rx_at_answer; /* bytes received when the last answer was queued */
  struct ipcount *ip;
  struct gconn *prev, *next;
};

struct connguard {
  char name[64];
  int per_ip_max;
  int64_t head_timeout_ms;
  pthread_mutex_t mu;
  struct ipcount *buckets[NBUCKETS];
  struct gconn *conns;
  _Atomic uint64_t refused[CG__N];
  _Atomic uint64_t expired[CG_EXPIRED__N];
  _Atomic int64_t last_log[CG__N];
  void (*on_refuse)(void *arg, enum connguard_reason r);
  void *on_refuse_arg;
  void (*on_idle_close)(void *arg, enum connguard_expiry k);
  void *on_idle_close_arg;
  pthread_t th;
  int started;
  atomic_int stop;
};

static const char *const reason_names[CG__N] = {"per_ip", "head_timeout"};

const char *connguard_reason_name(enum connguard_reason r) {
  return r >= 0 && r < CG__N ? reason_names[r] : "unknown";
}

static const char *const expiry_names[CG_EXPIRED__N] = {"head", "idle", "gone"};

const char *connguard_expiry_name(enum connguard_expiry k) {
  return k >= 0 && k < CG_EXPIRED__N ? expiry_names[k] : "unknown";
}

int connguard_ip_key(const struct sockaddr *sa, socklen_t len, char *out, size_t cap) {
  if (!sa || cap < 8) return -1;
  if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
    return inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)cap)
               ? 0
               : -1;
  }
  if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a))
      return inet_ntop(AF_INET, a->s6_addr + 12, out, (socklen_t)cap) ? 0 : -1;
    return inet_ntop(AF_INET6, a, out, (socklen_t)cap) ? 0 : -1;
  }
  if (sa->sa_family == AF_UNIX) {
    snprintf(out, cap, "unix:");
    return 0;
  }
  return -1;
}

int connguard_head_expired(int64_t head_start, int head_done, int64_t now, int64_t timeout_ms) {
  return timeout_ms > 0 && !head_done && now - head_start > timeout_ms;
}

int connguard_conn_busy(int head_done, uint64_t requests, int64_t head_start, int64_t now,
                        int64_t timeout_ms) {
  if (head_done) return 1;
  return requests == 0 && (timeout_ms <= 0 || now - head_start <= timeout_ms);
}

enum connguard_expiry connguard_expiry_of(uint64_t requests, int peer_closed, int rx_known,
                                          uint64_t rx_at_answer, uint64_t rx_now) {
  if (peer_closed) return CG_EXPIRED_GONE;
  if (requests > 0 && rx_known && rx_now == rx_at_answer) return CG_EXPIRED_IDLE;
  return CG_EXPIRED_HEAD;
}

/* The bytes the kernel has received on fd into *out: 1, or 0 when it does not count them. */
static int rx_bytes(int fd, uint64_t *out) {
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  memset(&ti, 0, sizeof ti);
  if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
      (size_t)len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
    return 0;
  *out = ti.tcpi_bytes_received;
  return 1;
}

/* Whether fd's peer has closed with nothing unread before the end of the stream. */
static int peer_closed(int fd) {
  char ch;
  return fd >= 0 && recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static unsigned hash(const char *s) {
  unsigned h = 2166136261u;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 16777619u;
  return h % NBUCKETS;
}

/* The count record of key; created when create is set. Caller holds mu. */
static struct ipcount *ip_find(struct connguard *g, const char *key, int create) {
  unsigned b = hash(key);
  struct ipcount *e;
  for (e = g->buckets[b]; e; e = e->next)
    if (strcmp(e->key, key) == 0) return e;
  if (!create || !(e = calloc(1, sizeof *e))) return NULL;
  snprintf(e->key, sizeof e->key, "%s", key);
  e->next = g->buckets[b];
  g->buckets[b] = e;
  return e;
}

static void ip_release(struct connguard *g, struct ipcount *e) {
  unsigned b;
  struct ipcount **pp;
  if (!e || --e->n > 0) return;
  b = hash(e->key);
  for (pp = &g->buckets[b]; *pp; pp = &(*pp)->next)
    if (*pp == e) {
      *pp = e->next;
      free(e);
      return;
    }
}

static void refuse(struct connguard *g, enum connguard_reason r, const char *who, int64_t now) {
  atomic_fetch_add(&g->refused[r], 1);
  if (g->on_refuse) g->on_refuse(g->on_refuse_arg, r);
  if (log_every(&g->last_log[r], now, 1000)) {
    if (r == CG_PER_IP)
      log_warn("%s: connection from %s refused: %d connections from that address are open "
               "(further refusals for a second are only counted)",
               g->name, who, g->per_ip_max);
    else
      log_warn("%s: a connection sent no whole request head within %lld ms; closed (further "
               "ones for a second are only counted)",
               g->name, (long long)g->head_timeout_ms);
  }
}

struct connguard *connguard_new(const char *listener, int per_ip_max, int64_t head_timeout_ms) {
  struct connguard *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  snprintf(g->name, sizeof g->name, "%s", listener);
  g->per_ip_max = per_ip_max > 0 ? per_ip_max : 0;
  g->head_timeout_ms = head_timeout_ms > 0 ? head_timeout_ms : 0;
  pthread_mutex_init(&g->mu, NULL);
  return g;
}

static void *sweeper(void *arg) {
  struct connguard *g = arg;
  while (!atomic_load(&g->stop)) {
    usleep(SWEEP_MS * 1000);
    connguard_sweep(g, clock_mono_ms());
  }
  return NULL;
}

int connguard_start(struct connguard *g) {
  if (g->started || !g->head_timeout_ms) return 0;
  if (pthread_create(&g->th, NULL, sweeper, g) != 0) return -1;
  g->started = 1;
  return 0;
}

void connguard_free(struct connguard **gp) {
  struct connguard *g = *gp;
  if (!g) return;
  if (g->started) {
    atomic_store(&g->stop, 1);
    pthread_join(g->th, NULL);
  }
  while (g->conns) {
    struct gconn *c = g->conns;
    g->conns = c->next;
    free(c);
  }
  for (int i = 0; i < NBUCKETS; i++)
    while (g->buckets[i]) {
      struct ipcount *e = g->buckets[i];
      g->buckets[i] = e->next;
      free(e);
    }
  pthread_mutex_destroy(&g->mu);
  free(g);
  *gp = NULL;
}

int connguard_admit(struct connguard *g, const struct sockaddr *sa, socklen_t len, int64_t now) {
  char key[KEY_MAX];
  struct ipcount *e;
  int ok = 1;
  if (!g->per_ip_max || connguard_ip_key(sa, len, key, sizeof key) < 0) return 1;
  pthread_mutex_lock(&g->mu);
  e = ip_find(g, key, 0);
  if (e && e->n >= g->per_ip_max) ok = 0;
  pthread_mutex_unlock(&g->mu);
  if (!ok) refuse(g, CG_PER_IP, key, now);
  return ok;
}

struct gconn *connguard_open(struct connguard *g, int fd, const struct sockaddr *sa, socklen_t len,
                             int64_t now) {
  char key[KEY_MAX];
  struct gconn *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->fd = fd;
  c->head_start = now;
  pthread_mutex_lock(&g->mu);
  if (g->per_ip_max && connguard_ip_key(sa, len, key, sizeof key) == 0 &&
      (c->ip = ip_find(g, key, 1)))
    c->ip->n++;
  c->next = g->conns;
  if (g->conns) g->conns->prev = c;
  g->conns = c;
  pthread_mutex_unlock(&g->mu);
  return c;
}

void connguard_head_done(struct connguard *g, struct gconn *c) {
  if (!c) return;
  pthread_mutex_lock(&g->mu);
  c->head_done = 1;
  c->rx_known = 0; /* until this request's answer */
  pthread_mutex_unlock(&g->mu);
}

void connguard_answering(struct connguard *g, struct gconn *c) {
  uint64_t rx = 0;
  int known;
  if (!c || !g->head_timeout_ms) return;
  known = rx_bytes(c->fd, &rx);
  pthread_mutex_lock(&g->mu);
  c->rx_known = known;
  c->rx_at_answer = rx;
  pthread_mutex_unlock(&g->mu);
}

void connguard_request_done(struct connguard *g, struct gconn *c, int64_t now) {
  if (!c) return;
  pthread_mutex_lock(&g->mu);
  c->head_done = 0;
  c->head_start = now;
  c->requests++;
  pthread_mutex_unlock(&g->mu);
}

void connguard_close(struct connguard *g, struct gconn *c) {
  if (!c) return;
  pthread_mutex_lock(&g->mu);
  if (c->prev)
    c->prev->next = c->next;
  else
    g->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  ip_release(g, c->ip);
  pthread_mutex_unlock(&g->mu);
  free(c);
}

int connguard_sweep(struct connguard *g, int64_t now) {
  int n = 0, kinds[CG_EXPIRED__N] = {0};
  pthread_mutex_lock(&g->mu);
  for (struct gconn *c = g->conns; c; c = c->next)
    if (c->fd >= 0 &&
        connguard_head_expired(c->head_start, c->head_done, now, g->head_timeout_ms)) {
      uint64_t rx = 0;
      int closed = peer_closed(c->fd), known = c->rx_known && rx_bytes(c->fd, &rx);
      kinds[connguard_expiry_of(c->requests, closed, known, c->rx_at_answer, rx)]++;
      /* the server sees the end of the stream and closes it; the descriptor stays its own */
      (void)shutdown(c->fd, SHUT_RDWR);
      c->head_done = 1; /* once */
      n++;
    }
  pthread_mutex_unlock(&g->mu);
  for (int k = 0; k < CG_EXPIRED__N; k++) {
    atomic_fetch_add(&g->expired[k], (uint64_t)kinds[k]);
    for (int i = 0; i < kinds[k]; i++)
      if (k == CG_EXPIRED_HEAD)
        refuse(g, CG_HEAD_TIMEOUT, "", now);
      else if (g->on_idle_close)
        g->on_idle_close(g->on_idle_close_arg, (enum connguard_expiry)k);
  }
  return n;
}

int connguard_busy(struct connguard *g, int64_t now) {
  int n = 0;
  pthread_mutex_lock(&g->mu);
  for (struct gconn *c = g->conns; c; c = c->next)
    n += connguard_conn_busy(c->head_done, c->requests, c->head_start, now, g->head_timeout_ms);
  pthread_mutex_unlock(&g->mu);
  return n;
}

void connguard_on_refuse(struct connguard *g, void (*fn)(void *arg, enum connguard_reason r),
                         void *arg) {
  g->on_refuse = fn;
  g->on_refuse_arg = arg;
}

uint64_t connguard_refused(struct connguard *g, enum connguard_reason r) {
  return atomic_load(&g->refused[r]);
}

void connguard_on_idle_close(struct connguard *g, void (*fn)(void *arg, enum connguard_expiry kind),
                             void *arg) {
  g->on_idle_close = fn;
  g->on_idle_close_arg = arg;
}

uint64_t connguard_expired(struct connguard *g, enum connguard_expiry k) {
  return k >= 0 && k < CG_EXPIRED__N ? atomic_load(&g->expired[k]) : 0;
}

int connguard_open_from(struct connguard *g, const struct sockaddr *sa, socklen_t len) {
  char key[KEY_MAX];
  struct ipcount *e;
  int n = 0;
  if (connguard_ip_key(sa, len, key, sizeof key) < 0) return 0;
  pthread_mutex_lock(&g->mu);
  if ((e = ip_find(g, key, 0))) n = e->n;
  pthread_mutex_unlock(&g->mu);
  return n;
}
