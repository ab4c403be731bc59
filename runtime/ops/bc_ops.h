/* ops/bc_ops.h: the public operations of one tensor (amax, scale, quantize, dequantize,
 * swizzle): argument checks, kernel choice, grids and launches (bc_ops.c). Stands on jit/,
 * fmt/ and base/. The layers above it (multi/, comm/) include this header. Nothing here is public. */
#ifndef BC_OPS_H
#define BC_OPS_H

#include "jit/bc_jit.h"

#endif
