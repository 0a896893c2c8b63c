/* token — crypto helpers over OpenSSL libcrypto. */
#include "token.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <string.h>

static void to_hex(const unsigned char *in, size_t n, char *out) {
  static const char hx[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = hx[in[i] >> 4];
    out[2 * i + 1] = hx[in[i] & 15];
  }
  out[2 * n] = '\0';
}

int token_random_hex(char *out, size_t cap, size_t nbytes) {
  unsigned char raw[64];
  if (nbytes > sizeof raw || cap < 2 * nbytes + 1) return -1;
  if (RAND_bytes(raw, (int)nbytes) != 1) return -1;
  to_hex(raw, nbytes, out);
  OPENSSL_cleanse(raw, sizeof raw);
  return 0;
}

int token_random(char *out, size_t cap) {
  return token_random_hex(out, cap, 32);
}

void token_sha256_hex(const void *data, size_t len, char out[65]) {
  unsigned char md[32];
  unsigned int mdlen = 0;
  EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
  to_hex(md, 32, out);
}

void token_hmac_hex(const void *key, size_t klen, const void *msg, size_t mlen, char out[65]) {
  unsigned char md[32];
  unsigned int mdlen = 0;
  HMAC(EVP_sha256(), key, (int)klen, msg, mlen, md, &mdlen);
  to_hex(md, 32, out);
}

int token_equal(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  unsigned char diff = (unsigned char)(la != lb);
  for (size_t i = 0; i < lb; i++)
    diff |= (unsigned char)(((i < la) ? a[i] : 0) ^ b[i]);
  return diff == 0;
}

/* docs/operations.md#admin-token-strength */
const char *token_admin_weakness(const char *tok) {
  /* the placeholder of the example environment file, and the one it had before */
  static const char *const placeholders[] = {TOKEN_ADMIN_PLACEHOLDER,
                                             "change-me-to-a-long-random-secret", NULL};
  unsigned char seen[256] = {0};
  size_t len = strlen(tok), distinct = 0;
  int hex = 1;

  for (size_t i = 0; placeholders[i]; i++)
    if (strcmp(tok, placeholders[i]) == 0) return "it is the placeholder of the example file";
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)tok[i];
    if (!isxdigit(ch)) hex = 0;
    if (!seen[ch]) {
      seen[ch] = 1;
      distinct++;
    }
  }
  if (hex && len < 32) return "it is shorter than 32 hex digits (128 bits)";
  if (len < 22) return "it is shorter than 22 characters (128 bits)";
  if (distinct < 6) return "it has fewer than 6 different characters";
  return NULL;
}

void token_wipe(void *p, size_t n) {
  if (p) OPENSSL_cleanse(p, n);
}
