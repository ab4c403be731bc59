/* tune.h: `blockcast tune`, the tuner of the command-line tool (tune.c; cli.c dispatches to it). */
#ifndef BC_TUNE_H
#define BC_TUNE_H
#include "jit/bc_jit.h"

int bc_cli_tune(bc_ctx *ctx, int argc, char **argv);
#endif
