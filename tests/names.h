/* tests/names.h: the names bc_kernel_names gives, in a list that grows (the built-in set is over 600
 * kernels an arch: a fixed array once checked only the first 512 of them). */
#ifndef BC_TEST_NAMES_H
#define BC_TEST_NAMES_H
#include <stdlib.h>
#include <string.h>

typedef struct names { char **v; int n, cap, lost; } names;

static inline void names_add(const char *name, void *u) {
  names *l = u;
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 1024;
    char **v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) { l->lost++; return; }
    l->v = v, l->cap = cap;
  }
  if (!(l->v[l->n] = strdup(name))) { l->lost++; return; }
  l->n++;
}

static inline void names_free(names *l) {
  for (int i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  memset(l, 0, sizeof *l);
}
#endif
