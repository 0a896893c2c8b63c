/* fuzz_audit — libFuzzer target: the untrusted text the team API reads that no JSON parser checks.
 * An input starting with an even byte is an expires_at string for clock_parse_iso: an accepted
 * time is not before the epoch, and formatting it back parses to the same second. An odd one is
 * "METHOD\nPATH\nBODY" for audit_summary / audit_site_id: the summary is terminated within its
 * buffer, ends "..." when cut, and never shows the value of a "secret" key. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "audit.h"
#include "clock.h"
#include "fuzz_check.h"
#include "json.h"

#define SECRET_MARK "S3CRET-VALUE"

static void fuzz_time(const unsigned char *data, size_t size) {
  char s[64], back[40];
  int64_t v = -7, again = -7;
  if (size >= sizeof s) size = sizeof s - 1;
  memcpy(s, data, size);
  s[size] = '\0';
  if (clock_parse_iso(s, &v) < 0) {
    FUZZ_CHECK(v == -7); /* untouched on refusal */
    return;
  }
  FUZZ_CHECK(v >= 0);
  clock_format_iso(v, back, sizeof back);
  FUZZ_CHECK(clock_parse_iso(back, &again) == 0);
  FUZZ_CHECK(again == v / 1000 * 1000);
}

static void fuzz_summary(const unsigned char *data, size_t size) {
  char buf[4096], out[96], full[16384];
  const char *method, *path, *body;
  char *nl;
  cJSON *j;
  int planted;
  if (size >= sizeof buf) size = sizeof buf - 1;
  memcpy(buf, data, size);
  buf[size] = '\0';
  method = buf;
  nl = strchr(buf, '\n');
  if (!nl) return;
  *nl = '\0';
  path = nl + 1;
  nl = strchr(path, '\n');
  body = "";
  if (nl) {
    *nl = '\0';
    body = nl + 1;
  }
  j = json_parse(body, strlen(body));
  /* plant a secret whose value must never show (when the input does not carry the mark itself) */
  planted = cJSON_IsObject(j) && !cJSON_GetObjectItemCaseSensitive(j, "secret") &&
            !strstr(body, SECRET_MARK) && !strstr(method, SECRET_MARK) &&
            !strstr(path, SECRET_MARK);
  if (planted) cJSON_AddStringToObject(j, "secret", SECRET_MARK);
  memset(out, 'x', sizeof out);
  audit_summary(method, path, j, j, out, sizeof out);
  audit_summary(method, path, j, j, full, sizeof full);
  FUZZ_CHECK(FUZZ_TERMINATED(out));
  FUZZ_CHECK(FUZZ_TERMINATED(full));
  if (strlen(full) < sizeof out) {
    FUZZ_CHECK(strcmp(out, full) == 0); /* fits: the same line */
  } else {                              /* cut: a prefix of it, then "..." */
    FUZZ_CHECK(strlen(out) == sizeof out - 1);
    FUZZ_CHECK(strcmp(out + sizeof out - 4, "...") == 0);
    FUZZ_CHECK(memcmp(out, full, sizeof out - 4) == 0);
  }
  if (planted) FUZZ_CHECK(strstr(full, SECRET_MARK) == NULL);
  (void)audit_site_id(path, j);
  cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0)
    fuzz_time(data + 1, size - 1);
  else
    fuzz_summary(data + 1, size - 1);
  return 0;
}
