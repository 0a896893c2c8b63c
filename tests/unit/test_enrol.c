/* Unit tests for noded/enrol: what a secret may be, a secret file's text, the token of an
   enrolment's answer, and the node token file (mode 0600, read back, absent, bad). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "enrol.h"

static void test_secret_text(void **state) {
  char out[ENROL_SECRET_MAX + 1], big[ENROL_SECRET_MAX + 2];
  (void)state;
  assert_int_equal(enrol_secret_text("abc\n", 4, out, sizeof out), 0);
  assert_string_equal(out, "abc");
  assert_int_equal(enrol_secret_text("abc \r\n\t", 7, out, sizeof out), 0);
  assert_string_equal(out, "abc");
  assert_int_equal(enrol_secret_text("abc", 3, out, sizeof out), 0);
  assert_int_equal(enrol_secret_text("", 0, out, sizeof out), -1);
  assert_int_equal(enrol_secret_text("\n\n", 2, out, sizeof out), -1);
  assert_int_equal(enrol_secret_text("a b", 3, out, sizeof out), -1);
  assert_int_equal(enrol_secret_text("ab\ncd", 5, out, sizeof out), -1); /* one line only */
  assert_int_equal(enrol_secret_text("a\0b", 3, out, sizeof out), -1);
  assert_int_equal(enrol_secret_text("\xc3\xa9", 2, out, sizeof out), -1);
  memset(big, 'a', sizeof big);
  assert_int_equal(enrol_secret_text(big, ENROL_SECRET_MAX, out, sizeof out), 0);
  assert_int_equal(enrol_secret_text(big, ENROL_SECRET_MAX + 1, out, sizeof out), -1);
  assert_int_equal(enrol_secret_text("abcdef", 6, out, 4), -1); /* does not fit */
  assert_int_equal(enrol_secret_ok("x"), 1);
  assert_int_equal(enrol_secret_ok(""), 0);
}

static void test_answer_token(void **state) {
  char tok[ENROL_SECRET_MAX + 1];
  static const char good[] = "{\"id\":3,\"name\":\"e\",\"token\":\"0123abcd\","
                             "\"enrolment_key\":{\"id\":1,\"name\":\"k\"}}";
  static const char *const bad[] = {"{\"id\":3,\"token\":null}",
                                    "{\"id\":3}",
                                    "[]",
                                    "nope",
                                    "{\"token\":\"a b\"}",
                                    "{\"token\":7}",
                                    "{\"token\":\"\"}"};
  (void)state;
  assert_int_equal(enrol_answer_token(good, strlen(good), tok, sizeof tok), 0);
  assert_string_equal(tok, "0123abcd");
  assert_int_equal(enrol_answer_token(good, strlen(good), tok, 4), -1);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (enrol_answer_token(bad[i], strlen(bad[i]), tok, sizeof tok) != -1)
      fail_msg("answer %s gave a token", bad[i]);
  assert_int_equal(enrol_answer_token(NULL, 0, tok, sizeof tok), -1);
}

static void test_token_file(void **state) {
  char dir[] = "/tmp/test_enrol.XXXXXX", path[256], tok[ENROL_SECRET_MAX + 1], err[512];
  struct stat st;
  FILE *f;
  (void)state;
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/%s", dir, ENROL_TOKEN_FILE);
  assert_int_equal(enrol_token_load(dir, tok, sizeof tok, err, sizeof err), 1);
  /* a stale temp file of another mode does not lend the token its mode */
  {
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, ENROL_TOKEN_FILE);
    f = fopen(tmp, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(chmod(tmp, 0644), 0);
  }
  umask(022);
  assert_int_equal(enrol_token_store(dir, "feedface", err, sizeof err), 0);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(enrol_token_load(dir, tok, sizeof tok, err, sizeof err), 0);
  assert_string_equal(tok, "feedface");
  /* replaced whole */
  assert_int_equal(enrol_token_store(dir, "cafe", err, sizeof err), 0);
  assert_int_equal(enrol_token_load(dir, tok, sizeof tok, err, sizeof err), 0);
  assert_string_equal(tok, "cafe");
  /* a file that holds no token is an error naming the file, never its text */
  f = fopen(path, "w");
  assert_non_null(f);
  fputs("two words\n", f);
  fclose(f);
  assert_int_equal(enrol_token_load(dir, tok, sizeof tok, err, sizeof err), -1);
  assert_non_null(strstr(err, path));
  assert_null(strstr(err, "words"));
  /* the key file: required to exist */
  assert_int_equal(enrol_key_load(path, tok, sizeof tok, err, sizeof err), -1);
  assert_non_null(strstr(err, "enrol-key-file"));
  unlink(path);
  assert_int_equal(enrol_key_load(path, tok, sizeof tok, err, sizeof err), -1);
  assert_non_null(strstr(err, "does not exist"));
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_secret_text),
      cmocka_unit_test(test_answer_token),
      cmocka_unit_test(test_token_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
