/* hello_mhd — the baseline for bench_api.sh: a bare libmicrohttpd server set up like controld's
 * (epoll internal thread, thread pool of 2, suspend/resume allowed) answering every request
 * with one fixed JSON body of about 900 bytes.
 *
 * usage: hello_mhd PORT [THREADS]   (listens on 127.0.0.1; SIGTERM/SIGINT stop it)
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* About the size of a site with two origins as GET /v1/sites/{id} returns it. */
static const char BODY[] =
    "{\"id\":1,\"name\":\"bench\",\"hostnames\":[\"bench.example.com\"],\"failback\":\"auto\","
    "\"failback_hold_ms\":0,\"health_check\":{\"enabled\":true,\"state\":\"active\",\"path\":\"/\","
    "\"timeout_ms\":5000,\"unhealthy_after\":3,\"healthy_after\":2,\"checkpoints\":false},"
    "\"node_retry\":{\"retries\":2,\"retry_budget_ms\":15000,\"fail_count\":3,"
    "\"fail_window_ms\":10000,\"skip_ms\":30000,\"half_open_requests\":1,"
    "\"retry_on_status\":[502,503,504]},\"current_level\":1,\"config_version\":1,\"origins\":["
    "{\"id\":1,\"level\":1,\"address\":\"10.0.0.1\",\"port\":443,\"scheme\":\"https\","
    "\"host_header\":null,\"weight\":1,\"enabled\":true,\"health\":\"unknown\"},"
    "{\"id\":2,\"level\":2,\"address\":\"10.0.0.2\",\"port\":80,\"scheme\":\"http\","
    "\"host_header\":null,\"weight\":1,\"enabled\":true,\"health\":\"unknown\"}],"
    "\"created_at\":\"2026-12-02T12:00:00Z\",\"updated_at\":\"2026-12-02T12:00:00Z\","
    "\"padding\":\"0123456789012345678901234567890123456789012345678901234567890123456789"
    "0123456789012345678901234567890123456789\"}";

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls) {
  struct MHD_Response *resp;
  enum MHD_Result ret;
  (void)cls, (void)url, (void)method, (void)version, (void)upload_data;
  if (!*con_cls) { /* first call: headers only */
    *con_cls = conn;
    return MHD_YES;
  }
  if (*upload_data_size) {
    *upload_data_size = 0;
    return MHD_YES;
  }
  /* a fresh response per request, as controld builds one per reply */
  resp = MHD_create_response_from_buffer(sizeof BODY - 1, (void *)BODY, MHD_RESPMEM_PERSISTENT);
  if (!resp) return MHD_NO;
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
  MHD_destroy_response(resp);
  return ret;
}

int main(int argc, char **argv) {
  struct sockaddr_in sa;
  struct MHD_Daemon *d;
  sigset_t sigs;
  int sig = 0;
  long port, threads = 2;
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: hello_mhd PORT [THREADS]\n");
    return 2;
  }
  port = strtol(argv[1], NULL, 10);
  if (argc == 3) threads = strtol(argv[2], NULL, 10);
  if (port < 1 || port > 65535 || threads < 1 || threads > 64) {
    fprintf(stderr, "hello_mhd: bad PORT or THREADS\n");
    return 2;
  }
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
                       0, NULL, NULL, on_access, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                       MHD_OPTION_THREAD_POOL_SIZE, (unsigned)threads, MHD_OPTION_CONNECTION_LIMIT,
                       16384u, MHD_OPTION_CONNECTION_TIMEOUT, 90u,
                       MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32 * 1024, MHD_OPTION_END);
  if (!d) {
    fprintf(stderr, "hello_mhd: cannot listen on 127.0.0.1:%ld\n", port);
    return 1;
  }
  printf("hello_mhd listening on 127.0.0.1:%ld (%ld threads, %zu-byte body)\n", port, threads,
         sizeof BODY - 1);
  fflush(stdout);
  sigwait(&sigs, &sig);
  MHD_stop_daemon(d);
  return 0;
}
