/* multi/bc_multi.h: operations on lists of tensors, one launch per list (bc_delayed.c: delayed
 * scaling). Stands on ops/, jit/, fmt/ and base/. Nothing here is public. */
#ifndef BC_MULTI_H
#define BC_MULTI_H

#include "ops/bc_ops.h"

#endif
