/* cli_util.c: the helpers that the command-line tool's commands share (cli.c's and tune.c's;
 * declared in cli_util.h), kept apart so that tune.c, which cli.c calls, does not call back into cli.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"

int whole_number(const char *s, long long *out) {
  char *end = NULL;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || end == s || *end) return 0;
  *out = x;
  return 1;
}

void collect(const char *name, void *user) {
  names *ns = user;
  if (ns->n == ns->cap) {
    ns->cap = ns->cap ? 2 * ns->cap : 64;
    ns->v = realloc(ns->v, ns->cap * sizeof *ns->v);
    if (!ns->v) { fprintf(stderr, "blockcast: out of memory\n"); exit(1); }
  }
  if (!(ns->v[ns->n++] = strdup(name))) { fprintf(stderr, "blockcast: out of memory\n"); exit(1); }
}

void names_free(names *ns) {
  for (size_t i = 0; i < ns->n; i++) free(ns->v[i]);
  free(ns->v);
  memset(ns, 0, sizeof *ns);
}
