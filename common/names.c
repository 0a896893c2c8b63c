/* names — an enum's one name table (see names.h). */
#include "names.h"

#include <string.h>

const char *names_word(const char *const *table, int n, int v, const char *fallback) {
  return v >= 0 && v < n && table[v] ? table[v] : fallback;
}

int names_value(const char *const *table, int n, const char *s) {
  if (!s) return -1;
  for (int i = 0; i < n; i++)
    if (table[i] && strcmp(table[i], s) == 0) return i;
  return -1;
}
