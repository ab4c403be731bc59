/* cli_util.h: the helpers that the command-line tool's commands share (cli.c, tune.c). */
#ifndef BC_CLI_UTIL_H
#define BC_CLI_UTIL_H
#include <stddef.h>

/* a growing list of names (kernel names from bci_lua_kernel_names / bc_kernel_names) */
typedef struct names {
  char **v;
  size_t n, cap;
} names;
/* the callback that appends a copy of `name` to the names at `user` (exits on out of memory) */
void collect(const char *name, void *user);
void names_free(names *ns);
/* 1 when s is a whole decimal number with nothing after it (into *out), else 0 */
int whole_number(const char *s, long long *out);
#endif
