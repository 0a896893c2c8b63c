/* Unit tests for noded/alog: access lines are buffered and written in batches (when due, when
   full, on flush and free), each exactly as log_write writes it, none lost or split. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "alog.h"
#include "log.h"

static char *slurp_fd(int fd) {
  off_t n = lseek(fd, 0, SEEK_END);
  char *data = calloc(1, (size_t)n + 1);
  assert_non_null(data);
  assert_int_equal(pread(fd, data, (size_t)n, 0), n);
  return data;
}

static int tmpfile_fd(void) {
  char path[] = "/tmp/cdnca-test-alog-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  return fd;
}

static int count_lines(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, needle)); p++)
    n++;
  return n;
}

/* The text after the timestamp (which differs by the call's time). */
static const char *after_ts(const char *line) {
  const char *p = strchr(line, ' ');
  assert_non_null(p);
  return p;
}

static void test_same_line_as_log_write(void **state) {
  int fd = tmpfile_fd(), saved = dup(STDERR_FILENO);
  struct log_tscache tc = {.sec = -1};
  char line[4608], *text;
  size_t n = 0;
  (void)state;
  log_init("noded", LOG_TEXT, LOG_INFO);
  dup2(fd, STDERR_FILENO);
  log_write(LOG_INFO, "access_default", "%s", "{\"type\":\"access\",\"path\":\"/a b\"}");
  dup2(saved, STDERR_FILENO);
  assert_int_equal(log_format_line(line, sizeof line, &n, &tc, LOG_INFO, "access_default",
                                   "{\"type\":\"access\",\"path\":\"/a b\"}", 32),
                   0);
  line[n] = '\0';
  text = slurp_fd(fd);
  assert_string_equal(after_ts(text), after_ts(line));
  assert_string_equal(after_ts(line),
                      " noded info: access_default: {\"type\":\"access\",\"path\":\"/a b\"}\n");
  free(text);

  /* JSON: the same object, the message escaped */
  log_set(LOG_JSON, LOG_INFO);
  assert_int_equal(ftruncate(fd, 0), 0);
  assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
  dup2(fd, STDERR_FILENO);
  log_write(LOG_INFO, "access_default", "%s", "{\"q\":\"x\\\\y\"}\t");
  dup2(saved, STDERR_FILENO);
  n = 0;
  assert_int_equal(log_format_line(line, sizeof line, &n, &tc, LOG_INFO, "access_default",
                                   "{\"q\":\"x\\\\y\"}\t", 14),
                   0);
  line[n] = '\0';
  text = slurp_fd(fd);
  assert_non_null(strstr(text, "\"level\":\"info\",\"prog\":\"noded\",\"func\":\"access_default\","
                               "\"msg\":\"{\\\"q\\\":\\\"x\\\\\\\\y\\\"}\\u0009\"}\n"));
  assert_string_equal(strstr(text, "\"level\""), strstr(line, "\"level\""));
  free(text);
  log_set(LOG_TEXT, LOG_INFO);

  /* a line that does not fit leaves the buffer as it was */
  n = 5;
  assert_int_equal(
      log_format_line(line, 40, &n, &tc, LOG_INFO, "f", "a message longer than that", 26), -1);
  assert_int_equal(n, 5);
  close(saved);
  close(fd);
}

static void test_batched_until_due(void **state) {
  int fd = tmpfile_fd();
  struct alog *a = alog_new(fd, 65536, 100);
  char *text;
  (void)state;
  assert_non_null(a);
  assert_int_equal(alog_due_in(a, 1000), -1);
  assert_int_equal(alog_line(a, LOG_INFO, "access_default", "one", 3, 1000), 0);
  assert_int_equal(alog_line(a, LOG_INFO, "access_default", "two", 3, 1040), 0);
  assert_int_equal(lseek(fd, 0, SEEK_END), 0); /* nothing written yet */
  assert_int_equal(alog_due_in(a, 1040), 60);
  alog_tick(a, 1099);
  assert_int_equal(lseek(fd, 0, SEEK_END), 0);
  alog_tick(a, 1100); /* the oldest line is 100 ms old: both go out, in order */
  text = slurp_fd(fd);
  assert_int_equal(count_lines(text, "\n"), 2);
  assert_non_null(strstr(text, "access_default: one\n"));
  assert_true(strstr(text, ": one\n") < strstr(text, ": two\n"));
  free(text);
  assert_int_equal(alog_due_in(a, 1100), -1);
  /* a line appended when the oldest is already due is written with it */
  assert_int_equal(alog_line(a, LOG_INFO, "f", "three", 5, 2000), 0);
  assert_int_equal(alog_line(a, LOG_INFO, "f", "four", 4, 2100), 0);
  text = slurp_fd(fd);
  assert_int_equal(count_lines(text, "\n"), 4);
  free(text);
  /* free writes out the rest */
  assert_int_equal(alog_line(a, LOG_INFO, "f", "five", 4, 3000), 0);
  alog_free(&a);
  assert_null(a);
  text = slurp_fd(fd);
  assert_int_equal(count_lines(text, "\n"), 5);
  assert_non_null(strstr(text, "f: five\n"));
  free(text);
  close(fd);
}

static void test_bounded_none_lost(void **state) {
  int fd = tmpfile_fd();
  struct alog *a = alog_new(fd, 8192, 100000);
  char msg[300], *text;
  off_t last = 0;
  int writes = 0;
  (void)state;
  memset(msg, 'x', sizeof msg);
  for (int i = 0; i < 1000; i++) {
    int k = snprintf(msg, sizeof msg, "line %04d ", i);
    msg[k] = 'x';
    assert_int_equal(alog_line(a, LOG_INFO, "f", msg, 200, 5), 0);
    off_t now = lseek(fd, 0, SEEK_END);
    if (now != last) {
      writes++;
      assert_true(now - last <= 8192); /* never more than the buffer at once */
      last = now;
    }
  }
  /* about 240 bytes a line: one write per ~34 lines, not one per line */
  assert_true(writes > 10 && writes < 100);
  /* a line longer than the whole buffer is dropped, the others are kept */
  {
    char big[9000];
    memset(big, 'y', sizeof big);
    assert_int_equal(alog_line(a, LOG_INFO, "f", big, sizeof big, 5), 0); /* cut at 2047 */
  }
  alog_flush(a);
  text = slurp_fd(fd);
  assert_int_equal(count_lines(text, "\n"), 1001);
  for (int i = 0; i < 1000; i += 111) {
    char want[32];
    snprintf(want, sizeof want, "f: line %04d x", i);
    assert_non_null(strstr(text, want));
  }
  free(text);
  alog_free(&a);
  close(fd);
}

/* A pipe (the journal's stream) gets whole lines in pieces of at most PIPE_BUF bytes. */
static void test_pipe_whole_lines(void **state) {
  int p[2];
  struct alog *a;
  char msg[100], rd[65536];
  size_t got = 0;
  (void)state;
  assert_int_equal(pipe(p), 0);
  a = alog_new(p[1], 65536, 100000);
  memset(msg, 'z', sizeof msg);
  for (int i = 0; i < 200; i++)
    assert_int_equal(alog_line(a, LOG_INFO, "f", msg, sizeof msg, 5), 0);
  alog_flush(a);
  close(p[1]);
  for (;;) {
    ssize_t k = read(p[0], rd + got, sizeof rd - got);
    if (k <= 0) break;
    got += (size_t)k;
  }
  rd[got < sizeof rd ? got : sizeof rd - 1] = '\0';
  assert_int_equal(count_lines(rd, "\n"), 200);
  assert_int_equal(rd[got - 1], '\n');
  alog_free(&a);
  close(p[0]);

  /* nobody reading any more: every line of the batch is counted dropped */
  assert_int_equal(pipe(p), 0);
  signal(SIGPIPE, SIG_IGN);
  close(p[0]);
  a = alog_new(p[1], 65536, 100000);
  for (int i = 0; i < 200; i++)
    assert_int_equal(alog_line(a, LOG_INFO, "f", msg, sizeof msg, 5), 0);
  alog_flush(a);
  assert_int_equal(alog_dropped(a), 200);
  alog_free(&a);
  close(p[1]);
}

/* The process's file size limit set to limit bytes (writes past it are cut short, then fail with
   EFBIG, as on a full disk), or back to what it was with limit 0. */
static void file_limit(off_t limit) {
  static struct rlimit saved;
  static int have;
  if (!have) {
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
    signal(SIGXFSZ, SIG_IGN);
    have = 1;
  }
  struct rlimit r = saved;
  if (limit > 0) r.rlim_cur = (rlim_t)limit;
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &r), 0);
}

/* Each line of text (ended by a newline) starts with a timestamp and has one message. */
static void assert_whole_lines(const char *text) {
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    assert_non_null(nl);
    assert_true(nl - p > 24);
    assert_memory_equal(p, "20", 2); /* the year */
    assert_true(p[4] == '-' && p[10] == 'T');
    p = nl + 1;
  }
}

/* A batch cut short (the disk full part-way) drops the rest of the batch, counted, and the next
   write starts on a new line: the cut line ends there instead of joining the next one. */
static void test_cut_write_starts_the_next_on_a_new_line(void **state) {
  int fd = tmpfile_fd();
  struct alog *a = alog_new(fd, 65536, 100000);
  char msg[150], *text;
  (void)state;
  memset(msg, 'c', sizeof msg);
  assert_int_equal(alog_line(a, LOG_INFO, "f", "first", 5, 5), 0);
  alog_flush(a);
  off_t first = lseek(fd, 0, SEEK_END);
  for (int i = 0; i < 3; i++)
    assert_int_equal(alog_line(a, LOG_INFO, "f", msg, sizeof msg, 5), 0);
  file_limit(first + 200); /* the first of the three whole, the second cut, the third not */
  alog_flush(a);
  file_limit(0);
  assert_int_equal(lseek(fd, 0, SEEK_END), first + 200);
  assert_int_equal(alog_dropped(a), 2);
  assert_int_equal(alog_line(a, LOG_INFO, "f", "after", 5, 6), 0);
  alog_flush(a);
  text = slurp_fd(fd);
  assert_int_equal(count_lines(text, "\n"), 4);
  /* the cut line ends where it was cut; the next line is whole and on its own */
  assert_string_equal(text + strlen(text) - 10, " f: after\n");
  const char *cut = strchr(strchr(strchr(text, '\n') + 1, '\n') + 1, '\n');
  assert_int_equal(cut - text, first + 200);
  assert_whole_lines(cut + 1);
  assert_int_equal(alog_dropped(a), 2);
  free(text);

  /* nothing written at all (the file at its limit): all dropped, nothing owed */
  assert_int_equal(alog_line(a, LOG_INFO, "f", "lost", 4, 7), 0);
  assert_int_equal(alog_line(a, LOG_INFO, "f", "lost", 4, 7), 0);
  file_limit(lseek(fd, 0, SEEK_END));
  alog_flush(a);
  file_limit(0);
  assert_int_equal(alog_dropped(a), 4);
  assert_int_equal(alog_line(a, LOG_INFO, "f", "kept", 4, 8), 0);
  alog_flush(a);
  text = slurp_fd(fd);
  assert_int_equal(count_lines(text, "\n"), 5);
  assert_null(strstr(text, "\n\n"));
  assert_non_null(strstr(text, "f: after\n"));
  assert_string_equal(text + strlen(text) - 9, " f: kept\n");
  free(text);
  alog_free(&a);
  close(fd);
}

/* The access log and the general log share stderr: a cut in one ends before the other's next
   line, and the newline owed is written once. */
static void test_cut_is_shared_with_log_write(void **state) {
  int fd = tmpfile_fd(), saved = dup(STDERR_FILENO);
  struct alog *a;
  char msg[300], *text;
  (void)state;
  log_init("noded", LOG_TEXT, LOG_INFO);
  dup2(fd, STDERR_FILENO);
  a = alog_new(STDERR_FILENO, 65536, 100000);
  memset(msg, 'd', sizeof msg);
  assert_int_equal(alog_line(a, LOG_INFO, "access_default", msg, sizeof msg, 5), 0);
  file_limit(100);
  alog_flush(a);
  file_limit(0);
  log_write(LOG_WARN, "main", "%s", "a general line");
  log_write(LOG_WARN, "main", "%s", "another");
  alog_flush(a);
  dup2(saved, STDERR_FILENO);
  close(saved);
  assert_int_equal(alog_dropped(a), 1);
  text = slurp_fd(fd);
  assert_int_equal(text[100], '\n');
  assert_int_equal(count_lines(text, "\n"), 3);
  assert_whole_lines(text + 101);
  assert_non_null(strstr(text + 101, "noded warn: main: a general line\n"));
  free(text);
  alog_free(&a);
  close(fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_line_as_log_write),
      cmocka_unit_test(test_batched_until_due),
      cmocka_unit_test(test_bounded_none_lost),
      cmocka_unit_test(test_pipe_whole_lines),
      cmocka_unit_test(test_cut_write_starts_the_next_on_a_new_line),
      cmocka_unit_test(test_cut_is_shared_with_log_write),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
