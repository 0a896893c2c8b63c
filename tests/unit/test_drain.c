/* Unit tests for noded/drain: what each signal does in each state of the process (the first
 * SIGTERM drains, a second ends it, SIGUSR2 upgrades only while serving), which visitor
 * connections close at once while draining, and keep-alive refused once draining. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "drain.h"

static void test_signals(void **state) {
  static const struct {
    enum drain_state st;
    int sig;
    enum drain_cmd want;
  } rows[] = {
      {DRAIN_SERVING, SIGTERM, DRAIN_CMD_DRAIN},   {DRAIN_SERVING, SIGINT, DRAIN_CMD_DRAIN},
      {DRAIN_SERVING, SIGHUP, DRAIN_CMD_RELOAD},   {DRAIN_SERVING, SIGUSR2, DRAIN_CMD_UPGRADE},
      {DRAIN_SERVING, SIGUSR1, DRAIN_CMD_NONE},    {DRAIN_UPGRADING, SIGUSR2, DRAIN_CMD_NONE},
      {DRAIN_UPGRADING, SIGTERM, DRAIN_CMD_DRAIN}, {DRAIN_UPGRADING, SIGHUP, DRAIN_CMD_RELOAD},
      {DRAIN_DRAINING, SIGTERM, DRAIN_CMD_END},    {DRAIN_DRAINING, SIGINT, DRAIN_CMD_END},
      {DRAIN_DRAINING, SIGHUP, DRAIN_CMD_NONE},    {DRAIN_DRAINING, SIGUSR2, DRAIN_CMD_NONE},
      {DRAIN_ENDING, SIGTERM, DRAIN_CMD_NONE},     {DRAIN_ENDING, SIGUSR2, DRAIN_CMD_NONE},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    if (drain_on_signal(rows[i].st, rows[i].sig) != rows[i].want)
      fail_msg("row %zu: state %d signal %d", i, rows[i].st, rows[i].sig);
  }
}

static void test_connections(void **state) {
  (void)state;
  /* idle between requests: closed at once */
  assert_int_equal(drain_conn_decide(1, 0, 1000, 31000), DRAIN_CONN_CLOSE);
  /* the next request's head arriving: answered (with Connection: close) */
  assert_int_equal(drain_conn_decide(1, 12, 1000, 31000), DRAIN_CONN_KEEP);
  /* a request in flight or a fresh connection before its first request: kept */
  assert_int_equal(drain_conn_decide(0, 0, 1000, 31000), DRAIN_CONN_KEEP);
  assert_int_equal(drain_conn_decide(0, 100, 30999, 31000), DRAIN_CONN_KEEP);
  /* the deadline closes everything */
  assert_int_equal(drain_conn_decide(0, 100, 31000, 31000), DRAIN_CONN_CLOSE);
  assert_int_equal(drain_conn_decide(0, 0, 40000, 31000), DRAIN_CONN_CLOSE);
}

static void test_keepalive(void **state) {
  (void)state;
  assert_true(drain_keepalive(0, 1, 0));
  assert_false(drain_keepalive(1, 1, 0));
  assert_false(drain_keepalive(0, 0, 0));
  assert_false(drain_keepalive(0, 1, 1));
  assert_false(drain_keepalive(1, 0, 1));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_signals),
      cmocka_unit_test(test_connections),
      cmocka_unit_test(test_keepalive),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
