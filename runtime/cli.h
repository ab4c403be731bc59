/* cli.h: what the command-line tool's files (cli.c, tune.c) share. */
#ifndef BC_CLI_H
#define BC_CLI_H
#include <stddef.h>

#include "jit/bc_jit.h"

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

/* blockcast tune (tune.c) */
int bc_cli_tune(bc_ctx *ctx, int argc, char **argv);
#endif
