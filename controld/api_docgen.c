/* api_docgen — the build's tool that writes the served OpenAPI document: controld/openapi.json
   with its marked record schemas filled from the field tables (api_doc.h).
   Usage: api_docgen IN OUT. Exit 0, or 1 with the reason on stderr. */
#include <stdio.h>
#include <stdlib.h>

#include "api_doc.h"

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  long n;
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (buf = malloc((size_t)n + 1))) {
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
      free(buf);
      buf = NULL;
    } else {
      buf[n] = '\0';
    }
  }
  fclose(f);
  return buf;
}

int main(int argc, char **argv) {
  char err[256];
  char *text, *out = NULL;
  cJSON *doc;
  FILE *f;
  if (argc != 3) {
    fprintf(stderr, "usage: api_docgen IN OUT\n");
    return 1;
  }
  if (!(text = read_all(argv[1])) || !(doc = cJSON_Parse(text))) {
    fprintf(stderr, "api_docgen: %s: cannot read it as JSON\n", argv[1]);
    return 1;
  }
  free(text);
  if (api_doc_fill(doc, err, sizeof err) < 0) {
    fprintf(stderr, "api_docgen: %s: %s\n", argv[1], err);
    return 1;
  }
  out = cJSON_Print(doc);
  cJSON_Delete(doc);
  if (!out || !(f = fopen(argv[2], "wb")) || fputs(out, f) < 0 || fputc('\n', f) < 0 ||
      fclose(f) != 0) {
    fprintf(stderr, "api_docgen: cannot write %s\n", argv[2]);
    return 1;
  }
  free(out);
  return 0;
}
