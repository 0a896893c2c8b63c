/* hostname — DNS name syntax. */
#include "hostname.h"

#include <ctype.h>
#include <string.h>

int hostname_valid(const char *name) {
  size_t len = strlen(name), label = 0;
  if (len == 0 || len > 253) return 0;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    if (c == '.') {
      if (label == 0 || name[i - 1] == '-') return 0;
      label = 0;
      continue;
    }
    if (!(islower((unsigned char)c) || isdigit((unsigned char)c) || c == '-')) return 0;
    if (label == 0 && c == '-') return 0;
    if (++label > 63) return 0;
  }
  return label > 0 && name[len - 1] != '-';
}

void hostname_lower(char *s) {
  for (; *s; s++)
    *s = (char)tolower((unsigned char)*s);
}
