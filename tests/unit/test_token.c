/* Unit tests for common/token (known-answer vectors). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "token.h"

static void test_sha256_vector(void **state) {
  char out[65];
  token_sha256_hex("abc", 3, out);
  assert_string_equal(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_hmac_vector(void **state) {
  /* RFC 4231 test case 2 */
  char out[65];
  const char *msg = "what do ya want for nothing?";
  token_hmac_hex("Jefe", 4, msg, strlen(msg), out);
  assert_string_equal(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

static void test_random(void **state) {
  char a[TOKEN_HEX_LEN + 1], b[TOKEN_HEX_LEN + 1];
  assert_int_equal(token_random(a, sizeof a), 0);
  assert_int_equal(token_random(b, sizeof b), 0);
  assert_int_equal(strlen(a), TOKEN_HEX_LEN);
  assert_string_not_equal(a, b);
  for (int i = 0; i < TOKEN_HEX_LEN; i++)
    assert_non_null(strchr("0123456789abcdef", a[i]));
  assert_int_equal(token_random(a, 10), -1);
}

static void test_equal(void **state) {
  assert_true(token_equal("secret", "secret"));
  assert_false(token_equal("secret", "secreT"));
  assert_false(token_equal("secret", "secret2"));
  assert_false(token_equal("secret2", "secret"));
  assert_false(token_equal("", "x"));
  assert_true(token_equal("", ""));
}

/* docs/operations.md#admin-token-strength */
static void test_admin_weakness(void **state) {
  char tok[TOKEN_HEX_LEN + 1];
  /* openssl rand -hex 32, openssl rand -hex 16, 22 base64url characters, the tests' tokens */
  assert_null(
      token_admin_weakness("3f9c2a7be41d08f65c9e2b7a1d4f80c36e5b9a2d7c1f04e8b3a6d9c2f5e8b1a4"));
  assert_null(token_admin_weakness("3f9c2a7be41d08f65c9e2b7a1d4f80c3"));
  assert_null(token_admin_weakness("Vq3_xR8-kL2pZ7mN4tY9wB"));
  assert_null(token_admin_weakness("adm-3f9c2a7be41d08f65c9e2b7a1d4f80c3"));
  assert_int_equal(token_random(tok, sizeof tok), 0);
  assert_null(token_admin_weakness(tok));
  /* the shipped placeholders */
  assert_non_null(token_admin_weakness(TOKEN_ADMIN_PLACEHOLDER));
  assert_non_null(token_admin_weakness("change-me-to-a-long-random-secret"));
  /* hex: 32 digits at least (31 is not), upper case counts as hex */
  assert_non_null(token_admin_weakness("3f9c2a7be41d08f65c9e2b7a1d4f80c"));
  assert_non_null(token_admin_weakness("3F9C2A7BE41D08F65C9E2B7A1D4F80C"));
  assert_null(token_admin_weakness("3F9C2A7BE41D08F65C9E2B7A1D4F80C3"));
  /* anything else: 22 characters at least (21 is not) */
  assert_non_null(token_admin_weakness("Vq3_xR8-kL2pZ7mN4tY9w"));
  assert_non_null(token_admin_weakness("short"));
  /* long enough but from too few characters */
  assert_non_null(token_admin_weakness("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"));
  assert_non_null(token_admin_weakness("abababababababababababababababababababab"));
  assert_non_null(token_admin_weakness("abcdeabcdeabcdeabcdeabcdeabcdeabcdeabcde"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sha256_vector),  cmocka_unit_test(test_hmac_vector),
      cmocka_unit_test(test_random),         cmocka_unit_test(test_equal),
      cmocka_unit_test(test_admin_weakness),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
