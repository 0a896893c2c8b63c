/* names — an enum's one name table: the word of each value (the log word, the metric label, the
   JSON and SQL string) and the value of a word. One table per enum, indexed by value, written with
   designated initializers, so adding a value is one line and both directions always agree. */
#ifndef CDNCA_NAMES_H
#define CDNCA_NAMES_H

#include <stddef.h>

/* A table and its length, for the calls below: NAMES(state_names). */
#define NAMES(table) (table), (int)(sizeof(table) / sizeof((table)[0]))

/* The word of value v in table[0..n), or fallback when v is out of range or has no word. Static
   strings. */
const char *names_word(const char *const *table, int n, int v, const char *fallback);

/* The value whose word is s (exact), or -1 when none (s NULL too). */
int names_value(const char *const *table, int n, const char *s);

#endif
