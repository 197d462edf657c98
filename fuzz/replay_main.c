/*
 * The replay driver: a main() for a fuzz harness built without libFuzzer,
 * so that every build (gcc, valgrind, the sanitizer builds) runs the seed
 * corpus and the regression inputs through the harness as an ordinary test.
 * An input that once crashed a harness stays a test for good this way.
 *
 * Usage: fuzz_replay_<harness> PATH...
 * Each PATH is a file, fed as one input, or a directory, whose files are
 * fed in name order (names starting with '.' are skipped; no recursion).
 * Exits 0 when every input ran; a harness that finds a broken property
 * aborts, and the last "Running:" line names the input.
 */
#include "fuzz_util.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Read a whole file into an exactly sized buffer, so that AddressSanitizer
 * and valgrind see a read past the input's end as libFuzzer would. */
static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "%s: %s\n", path, strerror(errno));
    return -1;
  }
  size_t cap = 4096, len = 0;
  uint8_t *buf = malloc(cap);
  size_t got;
  while (buf != NULL && (got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) {
      uint8_t *grown = realloc(buf, cap *= 2);
      if (grown == NULL)
        free(buf);
      buf = grown;
    }
  }
  int failed = buf == NULL || ferror(f);
  fclose(f);
  if (failed) {
    fprintf(stderr, "%s: cannot read it\n", path);
    free(buf);
    return -1;
  }
  /* The exact size; one byte for an empty input, whose pointer is still
   * valid as libFuzzer's is. */
  uint8_t *input = malloc(len > 0 ? len : 1);
  if (input == NULL) {
    free(buf);
    return -1;
  }
  memcpy(input, buf, len);
  free(buf);
  fprintf(stderr, "Running: %s (%zu bytes)\n", path, len);
  (void)LLVMFuzzerTestOneInput(input, len);
  free(input);
  return 0;
}

static int visible(const struct dirent *e) { return e->d_name[0] != '.'; }

static int replay_dir(const char *dir, size_t *n) {
  struct dirent **names;
  int count = scandir(dir, &names, visible, alphasort);
  if (count < 0) {
    fprintf(stderr, "%s: %s\n", dir, strerror(errno));
    return -1;
  }
  int rc = 0;
  for (int i = 0; i < count; i++) {
    size_t len = strlen(dir) + strlen(names[i]->d_name) + 2;
    char *path = malloc(len);
    struct stat st;
    if (path == NULL) {
      rc = -1;
    } else {
      snprintf(path, len, "%s/%s", dir, names[i]->d_name);
      if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        if (replay_file(path) == 0)
          (*n)++;
        else
          rc = -1;
      }
    }
    free(path);
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE-OR-DIRECTORY...\n", argv[0]);
    return 2;
  }
  size_t n = 0;
  int rc = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
      rc = 1;
    } else if (S_ISDIR(st.st_mode)) {
      if (replay_dir(argv[i], &n) != 0)
        rc = 1;
    } else if (replay_file(argv[i]) == 0) {
      n++;
    } else {
      rc = 1;
    }
  }
  printf("%s: replayed %zu inputs\n", argv[0], n);
  return rc;
}
