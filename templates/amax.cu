// templates/amax.cu: per-tensor amax = max |x| over in[rows, cols] (row stride ld).
// NaN inputs are ignored (fmaxf), as in TransformerEngine; the result is >= 0. Each block
// reduces its share and folds it into *amax with an integer atomicMax on the fp32 bits (order
// of non-negative floats = order of their bits). The host zeroes *amax before the launch.

extern "C" __global__ void __launch_bounds__(BC_THREADS, BC_MIN_BLOCKS)
${KERNEL}(const BC_DTYPE_T *__restrict__ in, i64 rows, i64 cols, i64 ld, float *__restrict__ amax, int vec_ok) {
  const i64 slots = (cols + BC_VEC - 1) / BC_VEC;
  const i64 stride = (i64)BC_GDIM.x * BC_THREADS * BC_UNROLL;
  float m = 0.0f;
  for (i64 r = BC_BID.y; r < rows; r += BC_GDIM.y) {
    const BC_DTYPE_T *src = in + r * ld;
    for (i64 base = (i64)BC_BID.x * BC_THREADS * BC_UNROLL + threadIdx.x; base < slots; base += stride) {
      uint4 v[BC_UNROLL];
      bc_load_slots(src, base, slots, cols, vec_ok, v);
#pragma unroll
      for (int u = 0; u < BC_UNROLL; u++) {
        i64 s = base + (i64)u * BC_THREADS;
        if (s >= slots) break;
        i64 c0 = s * BC_VEC;
        if (vec_ok && c0 + BC_VEC <= cols) {
          float f[BC_VEC];
          bc_unpack16(v[u], f);
#pragma unroll
          for (int j = 0; j < BC_VEC; j++) m = fmaxf(m, fabsf(f[j]));
        } else {
#pragma unroll 1
          for (i64 c = c0; c < cols && c < c0 + BC_VEC; c++) m = fmaxf(m, fabsf(bc_load_hp(src, c)));
        }
      }
    }
  }
  m = bc_block_max(m);
  if (threadIdx.x == 0 && m > 0.0f) atomicMax((unsigned int *)amax, __float_as_uint(m));
}
