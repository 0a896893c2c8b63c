/* fuzz_check — the one assertion the fuzz targets use: report the broken property and abort. */
#ifndef CDNCA_FUZZ_CHECK_H
#define CDNCA_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Abort (libFuzzer records the input as a crash) when cond is false. */
#define FUZZ_CHECK(cond)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: property broken: %s\n", __FILE__, __LINE__, #cond);                  \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

/* 1 when the char array a holds a NUL within its size. */
#define FUZZ_TERMINATED(a) (memchr((a), '\0', sizeof(a)) != NULL)

/* The libFuzzer entry points each target defines (Initialize is optional). */
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#endif
