/* test_probe — the batch prober against real test origins on loopback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "testutil.h"

#include "buf.h"
#include "hcheck.h"
#include "json.h"
#include "probe.h"
#include "probe_poll.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CDNCA_TESTS_DIR
#error "CDNCA_TESTS_DIR must name the tests source directory"
#endif

#define ORIGIN_PY CDNCA_TESTS_DIR "/integration/origin.py"
#define CERTS_PY CDNCA_TESTS_DIR "/integration/certs.py"
#define TEST_UA "cdnca-test/origin-probe"

struct origin {
  pid_t pid;
  int port;
  int tls;
  char host[64]; /* listen address */
};

struct env {
  char dir[64];     /* temp dir: certs, port files */
  char ca[128];     /* CA that signed the "origin.test" cert */
  char ca2[128];    /* a second, unrelated CA */
  struct origin a;  /* http, the workhorse */
  struct origin b;  /* http, redirect target */
  struct origin t;  /* https, cert for origin.test + 127.0.0.1 by ca */
  struct origin u;  /* https, cert for origin.test by ca2 */
  struct origin v6; /* http on ::1 (port 0 when IPv6 is missing) */
  int refused_fd;   /* bound, never listening: connections are refused */
  int refused_port;
  int silent_fd; /* listening, never accepting: requests get no answer */
  int silent_port;
};

/* Run argv to completion with a bounded wait; 0 when it exited 0. */
static int run_cmd(char *const argv[]) {
  int status = 0;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
    execvp(argv[0], argv);
    _exit(127);
  }
  for (int i = 0; i < 600; i++) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) return (WIFEXITED(status) && WEXITSTATUS(status) == 0) ? 0 : -1;
    sleep_ms(100);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

/* Start origin.py; 0 once it listens (port known), -1 otherwise. */
static int origin_start(struct env *e, struct origin *o, const char *name, const char *host,
                        const char *cert_stem) {
  char portfile[128], cert[128], key[128];
  snprintf(portfile, sizeof portfile, "%s/%s.port", e->dir, name);
  snprintf(o->host, sizeof o->host, "%s", host);
  o->tls = cert_stem != NULL;
  if (cert_stem) {
    snprintf(cert, sizeof cert, "%s/%s.pem", e->dir, cert_stem);
    snprintf(key, sizeof key, "%s/%s.key", e->dir, cert_stem);
  }
  o->pid = fork();
  if (o->pid < 0) return -1;
  if (o->pid == 0) {
    if (cert_stem)
      execlp("python3", "python3", ORIGIN_PY, "--port", "0", "--host", host, "--portfile", portfile,
             "--name", name, "--tls-cert", cert, "--tls-key", key, (char *)NULL);
    else
      execlp("python3", "python3", ORIGIN_PY, "--port", "0", "--host", host, "--portfile", portfile,
             "--name", name, (char *)NULL);
    _exit(127);
  }
  for (int i = 0; i < 1000; i++) { /* up to ~20 s */
    FILE *f = fopen(portfile, "r");
    int status;
    if (f) {
      int ok = fscanf(f, "%d", &o->port) == 1;
      fclose(f);
      if (ok && o->port > 0) return 0;
    }
    if (waitpid(o->pid, &status, WNOHANG) == o->pid) {
      o->pid = 0;
      return -1;
    }
    sleep_ms(20);
  }
  return -1;
}

static void origin_stop(struct origin *o) {
  int status;
  if (o->pid <= 0) return;
  kill(o->pid, SIGTERM);
  for (int i = 0; i < 100; i++) {
    if (waitpid(o->pid, &status, WNOHANG) == o->pid) goto out;
    sleep_ms(50);
  }
  kill(o->pid, SIGKILL);
  waitpid(o->pid, &status, 0);
out:
  o->pid = 0;
}

static size_t collect(char *data, size_t size, size_t nmemb, void *ud) {
  return buf_append(ud, data, size * nmemb) == 0 ? size * nmemb : 0;
}

/* One control request to an origin (POST body when non-NULL, else GET); parsed JSON or NULL. */
static cJSON *origin_call(struct env *e, const struct origin *o, const char *path,
                          const char *body) {
  char url[256], resolve[128];
  struct buf out;
  cJSON *j = NULL;
  struct curl_slist *res = NULL;
  CURL *c = curl_easy_init();
  if (!c) return NULL;
  buf_init(&out, 1 << 20);
  if (strchr(o->host, ':'))
    snprintf(url, sizeof url, "http://[%s]:%d%s", o->host, o->port, path);
  else
    snprintf(url, sizeof url, "%s://origin.test:%d%s", o->tls ? "https" : "http", o->port, path);
  snprintf(resolve, sizeof resolve, "origin.test:%d:%s", o->port, o->host);
  res = curl_slist_append(NULL, resolve);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_RESOLVE, res);
  curl_easy_setopt(c, CURLOPT_PROXY, "");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(c, CURLOPT_CAINFO, o == &e->u ? e->ca2 : e->ca);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
  if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  if (curl_easy_perform(c) == CURLE_OK && out.data) j = json_parse(out.data, out.len);
  curl_easy_cleanup(c);
  curl_slist_free_all(res);
  buf_fini(&out);
  return j;
}

/* POST /__ctl; asserts it was accepted. */
static void origin_ctl(struct env *e, const struct origin *o, const char *json) {
  cJSON *j = origin_call(e, o, "/__ctl", json);
  assert_non_null(j);
  assert_null(cJSON_GetObjectItemCaseSensitive(j, "error"));
  cJSON_Delete(j);
}

/* GET /__stats; caller frees. */
static cJSON *origin_stats(struct env *e, const struct origin *o) {
  cJSON *j = origin_call(e, o, "/__stats", NULL);
  assert_non_null(j);
  return j;
}

static int stats_int(const cJSON *j, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  assert_true(cJSON_IsNumber(v));
  return v->valueint;
}

static const char *stats_header(const cJSON *j, const char *name) {
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "last_headers");
  const cJSON *v = cJSON_GetObjectItem(h, name); /* header names are case-insensitive */
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int have_ipv6(void) {
  struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  int ok;
  if (fd < 0) return 0;
  ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
  close(fd);
  return ok;
}

static int group_setup(void **state) {
  static struct env e;
  char ca2dir[96];
  memset(&e, 0, sizeof e);
  e.refused_fd = e.silent_fd = -1;
  snprintf(e.dir, sizeof e.dir, "/tmp/cdnca-test-probe-XXXXXX");
  if (!mkdtemp(e.dir)) return -1;
  snprintf(e.ca, sizeof e.ca, "%s/ca.pem", e.dir);
  snprintf(ca2dir, sizeof ca2dir, "%s/other", e.dir);
  snprintf(e.ca2, sizeof e.ca2, "%s/ca.pem", ca2dir);
  {
    char *mk1[] = {"python3", CERTS_PY,    "--dir",  e.dir,    "--host", "origin.test",
                   "--ip",    "127.0.0.1", "--stem", "server", NULL};
    char *mk2[] = {"python3",     CERTS_PY, "--dir",  ca2dir, "--host",
                   "origin.test", "--stem", "server", NULL};
    char *mv[] = {"cp", "--", "", "", NULL};
    char from[160], to[160];
    if (run_cmd(mk1) != 0 || run_cmd(mk2) != 0) return -1;
    /* Give the second CA's server cert a stem in the main dir for origin_start. */
    snprintf(from, sizeof from, "%s/server.pem", ca2dir);
    snprintf(to, sizeof to, "%s/server2.pem", e.dir);
    mv[2] = from;
    mv[3] = to;
    if (run_cmd(mv) != 0) return -1;
    snprintf(from, sizeof from, "%s/server.key", ca2dir);
    snprintf(to, sizeof to, "%s/server2.key", e.dir);
    if (run_cmd(mv) != 0) return -1;
  }
  if (origin_start(&e, &e.a, "a", "127.0.0.1", NULL) != 0 ||
      origin_start(&e, &e.b, "b", "127.0.0.1", NULL) != 0 ||
      origin_start(&e, &e.t, "t", "127.0.0.1", "server") != 0 ||
      origin_start(&e, &e.u, "u", "127.0.0.1", "server2") != 0)
    return -1;
  if (have_ipv6() && origin_start(&e, &e.v6, "v6", "::1", NULL) != 0) return -1;
  e.refused_fd = loopback_socket(0, &e.refused_port);
  e.silent_fd = loopback_socket(1, &e.silent_port);
  if (e.refused_fd < 0 || e.silent_fd < 0) return -1;
  *state = &e;
  return 0;
}

static int group_teardown(void **state) {
  struct env *e = *state;
  char *rm[] = {"rm", "-rf", "--", NULL, NULL};
  if (!e) return 0;
  origin_stop(&e->a);
  origin_stop(&e->b);
  origin_stop(&e->t);
  origin_stop(&e->u);
  origin_stop(&e->v6);
  if (e->refused_fd >= 0) close(e->refused_fd);
  if (e->silent_fd >= 0) close(e->silent_fd);
  rm[3] = e->dir;
  run_cmd(rm);
  return 0;
}

/* Each test starts from a fresh origin "a" and "b". */
static int test_setup(void **state) {
  struct env *e = *state;
  origin_ctl(e, &e->a, "{\"reset\": true}");
  origin_ctl(e, &e->b, "{\"reset\": true}");
  return 0;
}

/* The engine every test runs with: main runs the whole group once per engine, and once more
   on the poll loop of tests/bench/probe_poll.c (g_poll, on PROBE_ENGINE_EPOLL_CURL). */
static enum probe_engine g_engine = PROBE_ENGINE_EPOLL;
static int g_poll;

/* probe_new on the engine of the run. */
static struct probe *probe_new_engine(struct probe_opts *o) {
  struct probe *p;
  o->engine = g_engine;
  p = probe_new(o);
  if (p && g_poll) assert_int_equal(probe_poll_use(p), 0);
  return p;
}

static struct probe *new_probe(const char *ca, int conc) {
  struct probe_opts o = {.user_agent = TEST_UA, .ca_file = ca, .max_concurrency = conc};
  struct probe *p = probe_new_engine(&o);
  assert_non_null(p);
  return p;
}

static struct probe_target http_target(const struct origin *o, const char *host, const char *path,
                                       int timeout_ms) {
  struct probe_target t = {.scheme = o->tls ? "https" : "http",
                           .address = o->host,
                           .port = o->port,
                           .host = host,
                           .path = path,
                           .timeout_ms = timeout_ms};
  return t;
}

/* Probe one target with a fresh prober and return its result. */
static struct probe_result probe_one(const struct probe_target *t, const char *ca) {
  struct probe *p = new_probe(ca, 0);
  struct probe_result r;
  assert_int_equal(probe_run(p, t, 1, &r, NULL), 0);
  probe_free(&p);
  assert_null(p);
  return r;
}

static void test_ok_200_headers(void **state) {
  struct env *e = *state;
  struct probe_target t = http_target(&e->a, "origin.test", "/healthz?x=1", 5000);
  struct probe_result r = probe_one(&t, NULL);
  cJSON *s;
  char host[64];
  assert_int_equal(r.ok, 1);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.error, "");
  assert_true(r.latency_ms >= 0);

  s = origin_stats(e, &e->a);
  assert_int_equal(stats_int(s, "total"), 1);
  assert_string_equal(cJSON_GetObjectItem(s, "last_target")->valuestring, "/healthz?x=1");
  assert_string_equal(cJSON_GetObjectItem(s, "last_method")->valuestring, "GET");
  snprintf(host, sizeof host, "origin.test:%d", e->a.port);
  assert_non_null(stats_header(s, "Host"));
  assert_string_equal(stats_header(s, "Host"), host);
  assert_non_null(stats_header(s, "User-Agent"));
  assert_string_equal(stats_header(s, "User-Agent"), TEST_UA);
  cJSON_Delete(s);
}

static void test_default_user_agent(void **state) {
  struct env *e = *state;
  struct probe_target t = http_target(&e->a, NULL, NULL, 5000);
  struct probe *p = probe_new(NULL);
  struct probe_result r;
  struct probe_opts node = {.user_agent = PROBE_UA_NODE};
  cJSON *s;
  char host[64];
  assert_non_null(p);
  assert_int_equal(probe_run(p, &t, 1, &r, NULL), 0);
  probe_free(&p);
  assert_int_equal(r.ok, 1);
  s = origin_stats(e, &e->a);
  assert_string_equal(stats_header(s, "User-Agent"), "cdnca-control-api/origin-probe");
  /* No host: the Host header is the address; no path: "/". */
  snprintf(host, sizeof host, "127.0.0.1:%d", e->a.port);
  assert_string_equal(stats_header(s, "Host"), host);
  assert_string_equal(cJSON_GetObjectItem(s, "last_target")->valuestring, "/");
  cJSON_Delete(s);

  p = probe_new(&node);
  assert_non_null(p);
  assert_int_equal(probe_run(p, &t, 1, &r, NULL), 0);
  probe_free(&p);
  s = origin_stats(e, &e->a);
  assert_string_equal(stats_header(s, "User-Agent"), "cdnca-node/origin-probe");
  cJSON_Delete(s);
}

static void test_404_is_success(void **state) {
  struct env *e = *state;
  struct probe_target t = http_target(&e->a, "origin.test", "/healthz", 5000);
  struct probe_result r;
  origin_ctl(e, &e->a, "{\"health_path_status\": {\"/healthz\": 404}}");
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 1);
  assert_int_equal(r.status, 404);
  assert_string_equal(r.error, "");
}

static void test_redirect_not_followed(void **state) {
  struct env *e = *state;
  struct probe_target t = http_target(&e->a, "origin.test", "/", 5000);
  struct probe_result r;
  char ctl[256];
  cJSON *s;
  int codes[] = {301, 302, 307};
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    snprintf(ctl, sizeof ctl,
             "{\"redirect\": \"http://127.0.0.1:%d/landing\", "
             "\"redirect_status\": %d}",
             e->b.port, codes[i]);
    origin_ctl(e, &e->a, ctl);
    r = probe_one(&t, NULL);
    assert_int_equal(r.ok, 1);
    assert_int_equal(r.status, codes[i]);
  }
  s = origin_stats(e, &e->b);
  assert_int_equal(stats_int(s, "total"), 0);
  cJSON_Delete(s);
  s = origin_stats(e, &e->a);
  assert_int_equal(stats_int(s, "total"), 3);
  cJSON_Delete(s);
}

/* Options from JSON onto the defaults. */
static struct hcheck_opts check_of(const char *text) {
  struct hcheck_opts o;
  struct field_err err;
  cJSON *j = json_parse(text, strlen(text));
  hcheck_defaults(&o);
  assert_non_null(j);
  if (hcheck_apply_json(j, &o, &err) != 0) fail_msg("%s: %s", err.field, err.message);
  cJSON_Delete(j);
  return o;
}

static void test_check_expected_codes(void **state) {
  struct env *e = *state;
  struct hcheck_opts c = check_of("{\"expected_codes\": [\"200-299\"]}");
  struct probe_target t = http_target(&e->a, "origin.test", "/", 5000);
  struct probe_result r;
  t.check = &c;
  origin_ctl(e, &e->a, "{\"status\": 403}");
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 0);
  assert_int_equal(r.status, 403);
  assert_string_equal(r.error, "unexpected status 403");
  t.check = NULL; /* the seed's rule: a 403 is a success */
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 1);
  origin_ctl(e, &e->a, "{\"status\": 204}");
  t.check = &c;
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 1);
  assert_string_equal(r.error, "");
}

static void test_check_expected_body(void **state) {
  struct env *e = *state;
  struct hcheck_opts good = check_of("{\"expected_body\": \"\\\"method\\\": \\\"GET\\\"\"}");
  struct hcheck_opts bad = check_of("{\"expected_body\": \"READY\"}");
  struct probe_target t = http_target(&e->a, "origin.test", "/", 5000);
  struct probe_result r;
  t.check = &good;
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 1);
  t.check = &bad;
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 0);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.error, "body mismatch");
  /* a marker past the first 64 KiB is not seen: /__big is a fixed pattern of hex digits */
  bad = check_of("{\"expected_body\": \"0123456789abcdef\"}");
  t = http_target(&e->a, "origin.test", "/__big?bytes=200000", 5000);
  t.check = &bad;
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 1);
}

static void test_check_head_and_headers(void **state) {
  struct env *e = *state;
  struct hcheck_opts c = check_of("{\"method\": \"HEAD\", \"headers\": {\"X-Probe\": \"cdnca\", "
                                  "\"Authorization\": \"Bearer t0k\"}}");
  struct probe_target t = http_target(&e->a, "origin.test", "/hc", 5000);
  struct probe_result r;
  cJSON *s;
  t.check = &c;
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 1);
  assert_int_equal(r.status, 200);
  s = origin_stats(e, &e->a);
  assert_string_equal(cJSON_GetObjectItem(s, "last_method")->valuestring, "HEAD");
  assert_non_null(stats_header(s, "X-Probe"));
  assert_string_equal(stats_header(s, "X-Probe"), "cdnca");
  assert_string_equal(stats_header(s, "Authorization"), "Bearer t0k");
  assert_string_equal(stats_header(s, "User-Agent"), TEST_UA);
  cJSON_Delete(s);
}

static void test_check_port(void **state) {
  struct env *e = *state;
  char js[64];
  struct hcheck_opts c;
  struct probe_target t;
  struct probe_result r;
  cJSON *s;
  /* the origin is "b"'s address with a dead port; the health port is "a"'s */
  snprintf(js, sizeof js, "{\"port\": %d}", e->a.port);
  c = check_of(js);
  t = http_target(&e->b, "origin.test", "/", 5000);
  t.port = e->refused_port;
  t.check = &c;
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 1);
  s = origin_stats(e, &e->a);
  assert_int_equal(stats_int(s, "total"), 1);
  cJSON_Delete(s);
}

/* 1 when the peer of fd closes within ms (read returns 0). */
static int peer_closes(int fd, int ms) {
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  char b[64];
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return read(fd, b, sizeof b) == 0;
}

static void test_check_tcp(void **state) {
  struct env *e = *state;
  struct hcheck_opts c = check_of("{\"type\": \"tcp\"}");
  int port = 0, lfd = loopback_socket(1, &port);
  struct probe_target t = {.scheme = "https", /* tcp: no TLS, whatever the scheme */
                           .address = "127.0.0.1",
                           .port = port,
                           .host = "origin.test",
                           .timeout_ms = 1000,
                           .check = &c};
  struct probe_result r;
  struct probe *p = new_probe(NULL, 4);
  cJSON *s;
  assert_true(lfd >= 0);
  /* a listener that never speaks HTTP is healthy, many times over the same prober, and every
   * probe closes its connection */
  for (int i = 0; i < 20; i++) {
    int cfd;
    assert_int_equal(probe_run(p, &t, 1, &r, NULL), 0);
    assert_int_equal(r.ok, 1);
    assert_string_equal(r.error, "");
    assert_int_equal(r.status, 0);
    cfd = accept(lfd, NULL, NULL);
    assert_true(cfd >= 0);
    assert_true(peer_closes(cfd, 2000));
    close(cfd);
  }
  probe_free(&p);
  close(lfd);
  t.port = e->refused_port;
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 0);
  assert_string_equal(r.error, "connect failed: Connection refused");
  /* against an HTTP origin: connected, nothing sent */
  t.port = e->a.port;
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 1);
  s = origin_stats(e, &e->a);
  assert_int_equal(stats_int(s, "total"), 0);
  cJSON_Delete(s);
}

static void test_5xx_is_failure(void **state) {
  struct env *e = *state;
  struct probe_target t = http_target(&e->a, "origin.test", "/", 5000);
  struct probe_result r;
  origin_ctl(e, &e->a, "{\"status\": 503}");
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 0);
  assert_int_equal(r.status, 503);
  assert_string_equal(r.error, "status 503");
  origin_ctl(e, &e->a, "{\"status\": 500}");
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 0);
  assert_int_equal(r.status, 500);
  origin_ctl(e, &e->a, "{\"status\": 499}");
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 1);
  assert_int_equal(r.status, 499);
}

static void test_connection_refused(void **state) {
  struct env *e = *state;
  struct probe_target t = {.scheme = "http",
                           .address = "127.0.0.1",
                           .port = e->refused_port,
                           .host = "origin.test",
                           .path = "/",
                           .timeout_ms = 5000};
  struct probe_result r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 0);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.error, "connect failed: Connection refused");
  assert_int_equal(r.local, 0); /* the origin's answer: a verdict */
}

/* With no descriptor left in the prober's process the probe is never made: a failure that is
   the prober's own (local), not a verdict on the origin, whichever client would have run it. */
static void test_no_descriptor_is_not_a_verdict(void **state) {
  struct env *e = *state;
  struct probe_target t = http_target(&e->a, "origin.test", "/", 5000);
  struct probe *p = new_probe(NULL, 0);
  struct probe_result r;
  struct rlimit old, low;
  int fds[64], n = 0, top;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
  top = dup(0);
  assert_true(top >= 0);
  close(top);
  low = old;
  low.rlim_cur = (rlim_t)top + 8;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  while (n < 64 && (fds[n] = dup(0)) >= 0)
    n++;
  assert_true(n < 64 && errno == EMFILE);
  assert_int_equal(probe_run(p, &t, 1, &r, NULL), 0);
  while (n > 0)
    close(fds[--n]);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
  assert_int_equal(r.ok, 0);
  assert_int_equal(r.local, 1);
  assert_non_null(strstr(r.error, "Too many open files"));
  /* descriptors back: the same prober asks the origin again */
  assert_int_equal(probe_run(p, &t, 1, &r, NULL), 0);
  assert_int_equal(r.ok, 1);
  assert_int_equal(r.local, 0);
  probe_free(&p);
}

/* An address the deny list refuses is never connected to, whichever client runs the probe. */
static void test_deny_list(void **state) {
  struct env *e = *state;
  struct targets deny;
  char err[64];
  struct probe_target t = http_target(&e->a, "origin.test", "/denied", 5000);
  struct probe_opts o = {.user_agent = TEST_UA, .deny = &deny};
  struct probe *p;
  struct probe_result r;
  cJSON *s;
  int before;
  assert_int_equal(targets_init(&deny, "127.0.0.0/8", err, sizeof err), 0);
  s = origin_stats(e, &e->a);
  before = stats_int(s, "total");
  cJSON_Delete(s);
  p = probe_new_engine(&o);
  assert_non_null(p);
  assert_int_equal(probe_run(p, &t, 1, &r, NULL), 0);
  probe_free(&p);
  assert_int_equal(r.ok, 0);
  assert_int_equal(r.status, 0);
  assert_true(strncmp(r.error, "connect failed", 14) == 0);
  s = origin_stats(e, &e->a);
  assert_int_equal(stats_int(s, "total"), before); /* the origin saw no request */
  cJSON_Delete(s);
}

static void test_timeout_silent_listener(void **state) {
  struct env *e = *state;
  struct probe_target t = {.scheme = "http",
                           .address = "127.0.0.1",
                           .port = e->silent_port,
                           .host = "origin.test",
                           .path = "/",
                           .timeout_ms = 300};
  struct probe_result r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 0);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.error, "timeout");
}

/* Probes with different deadlines in one batch: each ends at its own (the epoll engine keeps
 * them in a heap; never early, and not long after). */
static void test_mixed_timeouts(void **state) {
  enum { N = 12 };
  static const int timeouts[] = {900, 300, 600};
  struct env *e = *state;
  struct probe_target t[N];
  struct probe_result r[N];
  struct probe *p = new_probe(NULL, 0);
  for (int i = 0; i < N; i++)
    t[i] = (struct probe_target){.scheme = "http",
                                 .address = "127.0.0.1",
                                 .port = e->silent_port,
                                 .host = "origin.test",
                                 .path = "/",
                                 .timeout_ms = timeouts[i % 3]};
  assert_int_equal(probe_run(p, t, N, r, NULL), 0);
  probe_free(&p);
  for (int i = 0; i < N; i++) {
    assert_int_equal(r[i].ok, 0);
    assert_string_equal(r[i].error, "timeout");
    assert_true(r[i].latency_ms >= t[i].timeout_ms - 5);
    assert_true(r[i].latency_ms < t[i].timeout_ms + 5000);
  }
}

static void test_timeout_slow_origin(void **state) {
  struct env *e = *state;
  struct probe_target t = http_target(&e->a, "origin.test", "/slow", 300);
  struct probe_result r;
  origin_ctl(e, &e->a, "{\"delay_ms\": 5000}");
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 0);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.error, "timeout");
}

static void test_dropped_connection(void **state) {
  struct env *e = *state;
  struct probe_target t = http_target(&e->a, "origin.test", "/", 5000);
  struct probe_result r;
  origin_ctl(e, &e->a, "{\"drop\": true}");
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 0);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.error, "empty reply");
  origin_ctl(e, &e->a, "{\"drop\": \"rst\"}");
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 0);
  assert_int_equal(r.status, 0);
  assert_true(r.error[0] != '\0');
}

static void test_big_body_cut(void **state) {
  struct env *e = *state;
  struct probe_target t = http_target(&e->a, "origin.test", "/__big?bytes=50000000", 20000);
  struct probe_result r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 1);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.error, "");
}

/* An origin whose chunked 200 has a chunk-size line whose extension never ends: it writes the
   head, "1;x=" and then 'e' until the client goes or 10 s pass. */
struct endless {
  int lfd;
  pthread_t t;
  size_t sent;
};

static void *endless_run(void *arg) {
  struct endless *o = arg;
  static const char head[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;x=";
  char req[4096], fill[4096];
  struct timespec t0, t1;
  int fd = accept(o->lfd, NULL, NULL);
  ssize_t n;
  if (fd < 0) return NULL;
  memset(fill, 'e', sizeof fill);
  (void)read(fd, req, sizeof req); /* the probe's head, in one read on loopback */
  if (write(fd, head, sizeof head - 1) < 0) goto out;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    n = write(fd, fill, sizeof fill);
    if (n > 0) o->sent += (size_t)n;
    clock_gettime(CLOCK_MONOTONIC, &t1);
  } while (n > 0 && t1.tv_sec - t0.tv_sec < 10);
out:
  close(fd);
  return NULL;
}

/* The verdict comes from the head long before the timeout, having read a bounded part of the
   stream: libcurl reads the extension itself, and without the wire bound (curlhead) it read on
   until the probe timed out. */
static void test_endless_chunk_extension(void **state) {
  struct endless o = {0};
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  struct probe_target t;
  struct probe_result r;
  (void)state;
  o.lfd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(o.lfd >= 0);
  assert_int_equal(bind(o.lfd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(o.lfd, 4), 0);
  assert_int_equal(getsockname(o.lfd, (struct sockaddr *)&a, &al), 0);
  assert_int_equal(pthread_create(&o.t, NULL, endless_run, &o), 0);
  t = (struct probe_target){.scheme = "http",
                            .address = "127.0.0.1",
                            .port = ntohs(a.sin_port),
                            .host = "origin.test",
                            .path = "/",
                            .timeout_ms = 8000};
  r = probe_one(&t, NULL);
  pthread_join(o.t, NULL);
  close(o.lfd);
  fprintf(stderr, "endless extension: ok %d status %d error '%s' in %d ms, origin sent %zu bytes\n",
          r.ok, r.status, r.error, r.latency_ms, o.sent);
  assert_true(r.latency_ms < 4000);
  assert_true(o.sent < 64u * 1024 * 1024);
}

static void test_https_ok(void **state) {
  struct env *e = *state;
  struct probe_target t = http_target(&e->t, "origin.test", "/tls", 5000);
  struct probe_result r = probe_one(&t, e->ca);
  cJSON *s;
  char host[64];
  assert_string_equal(r.error, "");
  assert_int_equal(r.ok, 1);
  assert_int_equal(r.status, 200);
  s = origin_stats(e, &e->t);
  assert_string_equal(cJSON_GetObjectItem(s, "last_sni")->valuestring, "origin.test");
  snprintf(host, sizeof host, "origin.test:%d", e->t.port);
  assert_string_equal(stats_header(s, "Host"), host);
  assert_string_equal(stats_header(s, "User-Agent"), TEST_UA);
  cJSON_Delete(s);

  /* No host: the certificate's IP SAN 127.0.0.1 matches the address. */
  t.host = NULL;
  r = probe_one(&t, e->ca);
  assert_int_equal(r.ok, 1);
  assert_int_equal(r.status, 200);
}

static void test_https_wrong_name(void **state) {
  struct env *e = *state;
  struct probe_target t = http_target(&e->t, "wrong.test", "/", 5000);
  struct probe_result r = probe_one(&t, e->ca);
  assert_int_equal(r.ok, 0);
  assert_int_equal(r.status, 0);
  assert_memory_equal(r.error, "tls: ", 5);
}

static void test_https_unknown_ca(void **state) {
  struct env *e = *state;
  struct probe_target t = http_target(&e->u, "origin.test", "/", 5000);
  struct probe_result r = probe_one(&t, e->ca);
  assert_int_equal(r.ok, 0);
  assert_int_equal(r.status, 0);
  assert_memory_equal(r.error, "tls: ", 5);

  /* The system CAs do not know the test CA either. (A new prober reads the system bundle, 150
   * CAs, during its first handshake: slow under ASan on a busy machine, hence 30 s.) */
  t = http_target(&e->t, "origin.test", "/", 30000);
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 0);
  assert_memory_equal(r.error, "tls: ", 5);

  /* Plain HTTP to a TLS port is a failure too, not a success. */
  t.scheme = "http";
  r = probe_one(&t, e->ca);
  assert_int_equal(r.ok, 0);
}

/* One slot runs probes of different kinds one after the other (max_concurrency 1): none of a
 * probe's own options (method, extra headers, tcp) leaks into the next, and every probe opens
 * its own connection. */
static void test_slot_reuse_options(void **state) {
  struct env *e = *state;
  struct hcheck_opts head = check_of("{\"method\": \"HEAD\", \"headers\": {\"X-Probe\": \"one\"}}");
  struct hcheck_opts tcp = check_of("{\"type\": \"tcp\"}");
  struct hcheck_opts other = check_of("{\"headers\": {\"X-Other\": \"two\"}}");
  const struct hcheck_opts *checks[6] = {&head, NULL, &tcp, &other, NULL, &head};
  struct probe_target t[6];
  struct probe_result r[6];
  struct probe *p = new_probe(NULL, 1);
  cJSON *s, *recent;
  int c0, c1, base;
  static const char *methods[5] = {"HEAD", "GET", "GET", "GET", "HEAD"};
  for (int i = 0; i < 6; i++) {
    t[i] = http_target(&e->a, "origin.test", "/reuse", 5000);
    t[i].check = checks[i];
  }
  s = origin_stats(e, &e->a);
  c0 = stats_int(s, "connections");
  cJSON_Delete(s);
  s = origin_stats(e, &e->a);
  base = stats_int(s, "connections") - c0; /* what one stats call adds */
  c0 = stats_int(s, "connections");
  cJSON_Delete(s);
  for (int round = 0; round < 2; round++) {
    origin_ctl(e, &e->a, "{\"reset_stats\": true}");
    s = origin_stats(e, &e->a);
    c0 = stats_int(s, "connections");
    cJSON_Delete(s);
    assert_int_equal(probe_run(p, t, 6, r, NULL), 0);
    for (int i = 0; i < 6; i++) {
      if (!r[i].ok) fail_msg("round %d probe %d: %s", round, i, r[i].error);
      assert_int_equal(r[i].status, i == 2 ? 0 : 200);
    }
    s = origin_stats(e, &e->a);
    c1 = stats_int(s, "connections");
    /* 6 probes, 6 connections (the tcp check's included), plus the stats call itself */
    assert_int_equal(c1 - c0, 6 + base);
    assert_int_equal(stats_int(s, "total"), 5);
    recent = cJSON_GetObjectItem(s, "recent");
    assert_int_equal(cJSON_GetArraySize(recent), 5);
    for (int i = 0; i < 5; i++) {
      cJSON *x = cJSON_GetArrayItem(recent, i);
      cJSON *h = cJSON_GetObjectItem(x, "headers");
      assert_string_equal(cJSON_GetObjectItem(x, "method")->valuestring, methods[i]);
      assert_int_equal(cJSON_GetObjectItem(h, "X-Probe") != NULL, i == 0 || i == 4);
      assert_int_equal(cJSON_GetObjectItem(h, "X-Other") != NULL,
                       i == 2); /* probe 3: the tcp check sent no request */
    }
    cJSON_Delete(s);
  }
  probe_free(&p);
}

/* One prober, one slot: certificate verification happens on every HTTPS probe, also with the CA
 * store built once and reused (a good probe does not let a later bad one through). */
static void test_https_verified_every_probe(void **state) {
  struct env *e = *state;
  struct probe_target t[5];
  struct probe_result r[5];
  struct probe *p = new_probe(e->ca, 1);
  for (int round = 0; round < 2; round++) {
    t[0] = http_target(&e->t, "origin.test", "/v", 5000);
    t[1] = http_target(&e->t, "wrong.test", "/v", 5000);  /* name mismatch */
    t[2] = http_target(&e->u, "origin.test", "/v", 5000); /* other CA */
    t[3] = http_target(&e->t, "origin.test", "/v", 5000);
    t[4] = http_target(&e->u, "origin.test", "/v", 5000);
    assert_int_equal(probe_run(p, t, 5, r, NULL), 0);
    for (int i = 0; i < 5; i++) {
      int good = i == 0 || i == 3;
      if (r[i].ok != good)
        fail_msg("round %d probe %d: ok %d error %s", round, i, r[i].ok, r[i].error);
      if (!good) assert_memory_equal(r[i].error, "tls: ", 5);
    }
  }
  probe_free(&p);
}

static void test_ipv6_literal(void **state) {
  struct env *e = *state;
  struct probe_target t = http_target(&e->v6, "origin.test", "/v6", 5000);
  struct probe_result r;
  cJSON *s;
  char host[64];
  if (e->v6.port == 0) skip();
  r = probe_one(&t, NULL);
  assert_string_equal(r.error, "");
  assert_int_equal(r.ok, 1);
  s = origin_stats(e, &e->v6);
  snprintf(host, sizeof host, "origin.test:%d", e->v6.port);
  assert_string_equal(stats_header(s, "Host"), host);
  cJSON_Delete(s);

  /* An IPv6 literal as the host too: "Host: [::1]:port". */
  t.host = "::1";
  r = probe_one(&t, NULL);
  assert_int_equal(r.ok, 1);
  s = origin_stats(e, &e->v6);
  snprintf(host, sizeof host, "[::1]:%d", e->v6.port);
  assert_string_equal(stats_header(s, "Host"), host);
  cJSON_Delete(s);
}

static void test_many_concurrent(void **state) {
  struct env *e = *state;
  enum { N = 500 };
  struct probe_target *t = calloc(N, sizeof *t);
  struct probe_result *r = calloc(N, sizeof *r);
  struct probe *p = new_probe(NULL, 0);
  cJSON *s;
  assert_non_null(t);
  assert_non_null(r);
  for (int i = 0; i < N; i++)
    t[i] = http_target(&e->a, "origin.test", "/many", 30000);
  assert_int_equal(probe_run(p, t, N, r, NULL), 0);
  for (int i = 0; i < N; i++) {
    if (!r[i].ok) fail_msg("target %d: %s", i, r[i].error);
    assert_int_equal(r[i].status, 200);
  }
  s = origin_stats(e, &e->a);
  assert_int_equal(stats_int(s, "total"), N);
  cJSON_Delete(s);
  probe_free(&p);
  free(t);
  free(r);
}

/* More targets than slots, mixed outcomes, one prober over several runs: results stay in place. */
static void test_queue_and_reuse(void **state) {
  struct env *e = *state;
  enum { N = 60 };
  struct probe_target t[N];
  struct probe_result r[N];
  struct probe *p = new_probe(e->ca, 4);
  cJSON *s;
  for (int i = 0; i < N; i++) {
    switch (i % 3) {
    case 0:
      t[i] = http_target(&e->a, "origin.test", "/q", 5000);
      break;
    case 1:
      t[i] = (struct probe_target){.scheme = "http",
                                   .address = "127.0.0.1",
                                   .port = e->refused_port,
                                   .path = "/",
                                   .timeout_ms = 5000};
      break;
    default:
      t[i] = http_target(&e->t, "origin.test", "/q", 5000);
      break;
    }
    t[i].user = &t[i];
  }
  for (int round = 0; round < 3; round++) {
    assert_int_equal(probe_run(p, t, N, r, NULL), 0);
    for (int i = 0; i < N; i++) {
      if (i % 3 == 1) {
        assert_int_equal(r[i].ok, 0);
        assert_string_equal(r[i].error, "connect failed: Connection refused");
      } else {
        if (!r[i].ok) fail_msg("round %d target %d: %s", round, i, r[i].error);
        assert_int_equal(r[i].status, 200);
      }
    }
  }
  s = origin_stats(e, &e->a);
  assert_int_equal(stats_int(s, "total"), 3 * N / 3);
  cJSON_Delete(s);
  assert_int_equal(probe_run(p, t, 0, r, NULL), 0);
  probe_free(&p);
  probe_free(&p); /* no-op */
}

static void test_invalid_targets(void **state) {
  struct env *e = *state;
  struct probe_target base = http_target(&e->a, "origin.test", "/", 5000);
  struct probe_target t[9];
  struct probe_result r[9];
  struct probe *p = new_probe(NULL, 0);
  cJSON *s;
  for (int i = 0; i < 9; i++)
    t[i] = base;
  t[0].scheme = "ftp";
  t[1].scheme = NULL;
  t[2].port = 0;
  t[3].port = 70000;
  t[4].path = "no-slash";
  t[5].path = "/a b";
  t[6].host = "evil.test/x";
  t[7].address = NULL;
  t[8].address = "1.2.3.4:80"; /* not a valid IPv6 literal, not a name */
  assert_int_equal(probe_run(p, t, 9, r, NULL), 0);
  for (int i = 0; i < 9; i++) {
    assert_int_equal(r[i].ok, 0);
    assert_int_equal(r[i].status, 0);
    assert_memory_equal(r[i].error, "invalid target: ", 16);
  }
  s = origin_stats(e, &e->a);
  assert_int_equal(stats_int(s, "total"), 0);
  cJSON_Delete(s);
  assert_int_equal(probe_run(NULL, t, 1, r, NULL), -1);
  assert_int_equal(probe_run(p, NULL, 1, r, NULL), -1);
  assert_int_equal(probe_run(p, t, 1, NULL, NULL), -1);
  probe_free(&p);
}

static void test_cancel_before(void **state) {
  struct env *e = *state;
  struct probe_target t[3];
  struct probe_result r[3];
  atomic_int cancel = 1;
  struct probe *p = new_probe(NULL, 2);
  for (int i = 0; i < 3; i++)
    t[i] = http_target(&e->a, "origin.test", "/", 5000);
  assert_int_equal(probe_run(p, t, 3, r, &cancel), 0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(r[i].ok, 0);
    assert_string_equal(r[i].error, "cancelled");
  }
  probe_free(&p);
}

struct canceller {
  atomic_int *flag;
};

static void *cancel_later(void *arg) {
  struct canceller *c = arg;
  sleep_ms(200);
  __atomic_store_n(c->flag, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

static void test_cancel_in_flight(void **state) {
  struct env *e = *state;
  struct probe_target t[2];
  struct probe_result r[2];
  atomic_int cancel = 0;
  struct canceller c = {.flag = &cancel};
  pthread_t th;
  struct probe *p = new_probe(NULL, 0);
  /* The silent listener never answers; the timeout is far longer than the cancel delay. */
  t[0] = (struct probe_target){.scheme = "http",
                               .address = "127.0.0.1",
                               .port = e->silent_port,
                               .path = "/",
                               .timeout_ms = 60000};
  t[1] = t[0];
  assert_int_equal(pthread_create(&th, NULL, cancel_later, &c), 0);
  assert_int_equal(probe_run(p, t, 2, r, &cancel), 0);
  pthread_join(th, NULL);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(r[i].ok, 0);
    assert_string_equal(r[i].error, "cancelled");
  }
  probe_free(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_ok_200_headers, test_setup),
      cmocka_unit_test_setup(test_default_user_agent, test_setup),
      cmocka_unit_test_setup(test_404_is_success, test_setup),
      cmocka_unit_test_setup(test_redirect_not_followed, test_setup),
      cmocka_unit_test_setup(test_5xx_is_failure, test_setup),
      cmocka_unit_test_setup(test_check_expected_codes, test_setup),
      cmocka_unit_test_setup(test_check_expected_body, test_setup),
      cmocka_unit_test_setup(test_check_head_and_headers, test_setup),
      cmocka_unit_test_setup(test_check_port, test_setup),
      cmocka_unit_test_setup(test_check_tcp, test_setup),
      cmocka_unit_test_setup(test_connection_refused, test_setup),
      cmocka_unit_test_setup(test_no_descriptor_is_not_a_verdict, test_setup),
      cmocka_unit_test_setup(test_deny_list, test_setup),
      cmocka_unit_test_setup(test_timeout_silent_listener, test_setup),
      cmocka_unit_test_setup(test_mixed_timeouts, test_setup),
      cmocka_unit_test_setup(test_timeout_slow_origin, test_setup),
      cmocka_unit_test_setup(test_dropped_connection, test_setup),
      cmocka_unit_test_setup(test_big_body_cut, test_setup),
      cmocka_unit_test_setup(test_endless_chunk_extension, test_setup),
      cmocka_unit_test_setup(test_https_ok, test_setup),
      cmocka_unit_test_setup(test_https_wrong_name, test_setup),
      cmocka_unit_test_setup(test_https_unknown_ca, test_setup),
      cmocka_unit_test_setup(test_slot_reuse_options, test_setup),
      cmocka_unit_test_setup(test_https_verified_every_probe, test_setup),
      cmocka_unit_test_setup(test_ipv6_literal, test_setup),
      cmocka_unit_test_setup(test_many_concurrent, test_setup),
      cmocka_unit_test_setup(test_queue_and_reuse, test_setup),
      cmocka_unit_test_setup(test_invalid_targets, test_setup),
      cmocka_unit_test_setup(test_cancel_before, test_setup),
      cmocka_unit_test_setup(test_cancel_in_flight, test_setup),
  };
  signal(SIGPIPE, SIG_IGN);
  int failed;
  /* every behaviour holds with every engine: epoll (the default: plain HTTP on our own sockets),
     epoll-curl (everything through libcurl), and the bench's poll loop (everything through
     libcurl, on curl_multi_poll through probe.h's loop seam) */
  g_engine = PROBE_ENGINE_EPOLL;
  failed = cmocka_run_group_tests_name("probe, engine epoll", tests, group_setup, group_teardown);
  g_engine = PROBE_ENGINE_EPOLL_CURL;
  g_poll = 1;
  failed += cmocka_run_group_tests_name("probe, engine poll", tests, group_setup, group_teardown);
  g_poll = 0;
  failed +=
      cmocka_run_group_tests_name("probe, engine epoll-curl", tests, group_setup, group_teardown);
  return failed;
}
