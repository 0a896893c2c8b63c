/* token — random bearer tokens, SHA-256 digests, HMAC-SHA256 and constant-time compare (OpenSSL
 * libcrypto). */
#ifndef CDNCA_TOKEN_H
#define CDNCA_TOKEN_H

#include <stddef.h>

#define TOKEN_HEX_LEN 64 /* 256 bits as lowercase hex */

/* Fill out (>= TOKEN_HEX_LEN + 1 bytes) with a fresh random 256-bit token in hex. 0 or -1 (no
 * entropy). */
int token_random(char *out, size_t cap) __attribute__((warn_unused_result));

/* SHA-256 of data as lowercase hex into out[65]. */
void token_sha256_hex(const void *data, size_t len, char out[65]);

/* HMAC-SHA256(key, msg) as lowercase hex into out[65]. */
void token_hmac_hex(const void *key, size_t klen, const void *msg, size_t mlen, char out[65]);

/* 1 when the two strings are equal; time depends only on the length of b. */
int token_equal(const char *a, const char *b);

/* Random bytes as hex (2*n chars + NUL into out, cap >= 2n+1); 0 or -1. */
int token_random_hex(char *out, size_t cap, size_t nbytes) __attribute__((warn_unused_result));

/* The admin token the example environment file ships with (deploy/controld.env.example). */
#define TOKEN_ADMIN_PLACEHOLDER "REPLACE-ME-with-the-output-of-openssl-rand-hex-32"

/* NULL when tok may be an admin token, else why not (a static string): it is a shipped
 * placeholder, shorter than 32 characters when every one is a hex digit or than 22 otherwise
 * (128 bits at 4 bits a hex digit, at about 6 bits any other character), or made of fewer than
 * 6 different characters. docs/operations.md#admin-token-strength */
const char *token_admin_weakness(const char *tok);

/* Wipe a secret before it is freed. */
void token_wipe(void *p, size_t n);

#endif
