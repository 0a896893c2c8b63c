/* noded — the cdnca edge node agent (config sync, probe tasks, visitor proxy). */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--version") == 0) {
      printf("noded %s\n", CDNCA_VERSION);
      return 0;
    }
    if (strcmp(argv[i], "--help") == 0) {
      printf("usage: noded --controld URL [options]\n");
      return 0;
    }
  }
  fprintf(stderr, "noded: not built yet in this tree\n");
  return 2;
}
