// templates/dequantize_block.cu: block-scaled dequantize of one direction (BC_DEQ_ROWWISE or
// columnwise), every block format:
//   out[dr, dc] = dtype(decode(q[dr, dc]) * scale)         (two-level: (q * s) * S_dec)
// q is the stored data matrix [drows, dcols] (4-bit elements two per byte, nibble order from
// the spec); out has the same shape with row stride ld. The view (whose rows hold the blocks) is
// the data itself (BC_DATA_IS_VIEW) or its transpose (MXFP8 columnwise); the element's block in
// the view is BC_VBR x BC_VBC and its scale entry is found through the scale layout bc_sl.
//
// A slot is 8 consecutive elements; codes and scales of all of a thread's slots are loaded before
// the first conversion. Two kernels cut the tensor into slots:
//  - by row (BC_DQ_FLAT 0): slot s of row dr is its elements [8s, 8s + 8). A thread converts
//    BC_UNROLL slots of a row that lie BC_THREADS apart, so each warp instruction loads and
//    stores whole lines; y strides over the rows. A slot inside the row is loaded as one vector
//    when the data rows are aligned (q_vec), byte-wise otherwise, and stored as vectors when the
//    output rows are aligned (out_vec), element-wise otherwise. The short last slot of a row
//    (dcols not a multiple of 8) goes element by element after the unrolled loop.
//  - flat (BC_DQ_FLAT 1, the __flat kernel: the host's choice for a contiguous output whose rows
//    are not aligned): slot s is elements [8s, 8s + 8) of the whole tensor, so every slot is one
//    aligned vector load and store, and BC_UNROLL slots BC_THREADS apart per thread over one 1D
//    grid. A slot's row comes from a float64 reciprocal of dcols (exact after one correction).
//    It may cross a block boundary and a row end: up to three scales, chosen per element. Only
//    the tensor's short last slot, and every slot when rows are shorter than a slot, go element
//    by element.

#define BC_SLOT 8
#define BC_SLOT_BYTES (BC_SLOT * BC_ELEM_BITS / 8)
#define BC_SLOT_WORDS ((BC_SLOT_BYTES + 3) / 4)
#if BC_DATA_IS_VIEW && BC_VBC >= BC_SLOT && BC_VBC % BC_SLOT == 0
#define BC_SLOT_SCALES 1 /* the slot lies in one block */
#else
#define BC_SLOT_SCALES BC_SLOT
#endif

// The scale entry of data element (dr, dc).
static __device__ __forceinline__ i64 bc_dq_off(const bc_sl &sl, i64 dr, i64 dc) {
  const i64 vr = BC_DATA_IS_VIEW ? dr : dc, vc = BC_DATA_IS_VIEW ? dc : dr;
  return bc_sl_offset(sl, sl.per_row ? vr : vr / BC_VBR, vc / BC_VBC);
}

static __device__ __forceinline__ u32 bc_dq_scale_bits(const void *scale, i64 off) {
#if BC_SCALE_BYTES == 4
  return ((const u32 *)scale)[off];
#else
  return ((const u8 *)scale)[off];
#endif
}

static __device__ __forceinline__ float bc_dq_value(float decoded, u32 scale_bits, const bc_tensor_scale &ts) {
#if BC_RULE == 3
  return __fmul_rn(__fmul_rn(decoded, bc_scale_dec(scale_bits)), ts.dec);
#else
  return __fmul_rn(decoded, bc_scale_dec(scale_bits));
#endif
}

// Codes j and j + 1 of a slot (j even) as one pair for bc_decode2: element j in the low bits.
static __device__ __forceinline__ u32 bc_dq_pair(const u32 *w, int j) {
  u32 p = w[(j * BC_ELEM_BITS) >> 5] >> ((j * BC_ELEM_BITS) & 31);
#if BC_ELEM_BITS == 4 && BC_PACK_HIGH_FIRST
  p = ((p >> 4) & 0xFu) | ((p & 0xFu) << 4);
#endif
  return p;
}

#if !BC_DQ_FLAT
extern "C" __global__ void __launch_bounds__(BC_THREADS, BC_MIN_BLOCKS)
${KERNEL}(const u8 *__restrict__ q, i64 drows, i64 dcols, const void *__restrict__ scale, bc_sl sl,
          const float *__restrict__ global_amax, BC_DTYPE_T *__restrict__ out, i64 ld, int q_vec, int out_vec) {
  const bc_tensor_scale ts = bc_tensor_scale_from_amax(global_amax);
  const i64 row_bytes = dcols * BC_ELEM_BITS / 8;
  const i64 full = dcols / BC_SLOT, slots = (dcols + BC_SLOT - 1) / BC_SLOT;
  const i64 base = (i64)blockIdx.x * BC_UNROLL * BC_THREADS + threadIdx.x;
  // data columnwise to the view (not transposed, 1xN view blocks): the scale entries of a slot's
  // elements are consecutive view rows, `step` apart in a compact layout (0: look each one up)
  const i64 step = BC_DATA_IS_VIEW || (BC_VBR != 1 && !sl.per_row) ? 0 : sl.order == 1 ? 1 : sl.order == 0 ? sl.ld : 0;
#pragma unroll 1
  for (i64 dr = blockIdx.y; dr < drows; dr += gridDim.y) {
    const u8 *qrow = q + dr * row_bytes;
    BC_DTYPE_T *orow = out + dr * ld;
    u32 w[BC_UNROLL][BC_SLOT_WORDS], sc[BC_UNROLL][BC_SLOT_SCALES];
#pragma unroll
    for (int u = 0; u < BC_UNROLL; u++) {
      const i64 s = base + (i64)u * BC_THREADS;
      if (s >= full) break;
      const u8 *src = qrow + s * BC_SLOT_BYTES;
      if (q_vec) {
#if BC_SLOT_BYTES == 8
        const uint2 v = *(const uint2 *)src;
        w[u][0] = v.x;
        w[u][1] = v.y;
#else
        w[u][0] = *(const u32 *)src;
#endif
      } else {
#pragma unroll
        for (int i = 0; i < BC_SLOT_WORDS; i++) w[u][i] = 0u;
#pragma unroll
        for (int i = 0; i < BC_SLOT_BYTES; i++) w[u][i >> 2] |= (u32)src[i] << (8 * (i & 3));
      }
      const i64 off = bc_dq_off(sl, dr, s * BC_SLOT);
#if BC_SLOT_SCALES == 1
      sc[u][0] = bc_dq_scale_bits(scale, off);
#else
#if BC_SCALE_BYTES == 1
      if (step == 1 && ((size_t)((const u8 *)scale + off) & 7) == 0) {
        // eight consecutive one-byte entries: one load
        const uint2 v = *(const uint2 *)((const u8 *)scale + off);
#pragma unroll
        for (int j = 0; j < BC_SLOT; j++) sc[u][j] = ((j < 4 ? v.x : v.y) >> (8 * (j & 3))) & 0xFFu;
      } else
#endif
#pragma unroll
      for (int j = 0; j < BC_SLOT; j++)
        sc[u][j] = bc_dq_scale_bits(scale, step ? off + j * step : bc_dq_off(sl, dr, s * BC_SLOT + j));
#endif
    }
#pragma unroll
    for (int u = 0; u < BC_UNROLL; u++) {
      const i64 s = base + (i64)u * BC_THREADS;
      if (s >= full) break;
      float f[BC_SLOT];
#pragma unroll
      for (int j = 0; j < BC_SLOT; j += 2) {
        bc_decode2(bc_dq_pair(w[u], j), &f[j], &f[j + 1]);
        f[j] = bc_dq_value(f[j], sc[u][BC_SLOT_SCALES == 1 ? 0 : j], ts);
        f[j + 1] = bc_dq_value(f[j + 1], sc[u][BC_SLOT_SCALES == 1 ? 0 : j + 1], ts);
      }
      BC_DTYPE_T *dst = orow + s * BC_SLOT;
#if BC_DTYPE == 0
      u32 h[BC_SLOT];
#pragma unroll
      for (int j = 0; j < BC_SLOT; j++) h[j] = bc_f32_bits_canonical(f[j]);
      if (out_vec) {
        *(uint4 *)dst = make_uint4(h[0], h[1], h[2], h[3]);
        *(uint4 *)(dst + 4) = make_uint4(h[4], h[5], h[6], h[7]);
      } else {
#pragma unroll
        for (int j = 0; j < BC_SLOT; j++) ((u32 *)dst)[j] = h[j];
      }
#else
      u32 h[BC_SLOT / 2];
#pragma unroll
      for (int j = 0; j < BC_SLOT / 2; j++) h[j] = bc_pack2_hp(f[2 * j], f[2 * j + 1]);
      if (out_vec) {
        *(uint4 *)dst = make_uint4(h[0], h[1], h[2], h[3]);
      } else {
#pragma unroll
        for (int j = 0; j < BC_SLOT; j++) dst[j] = (u16)(h[j >> 1] >> (16 * (j & 1)));
      }
#endif
    }
    // the short last slot of the row, element by element
    if (full < slots && base <= full && full < base + (i64)BC_UNROLL * BC_THREADS && (full - base) % BC_THREADS == 0) {
#pragma unroll 1
      for (i64 dc = full * BC_SLOT; dc < dcols; dc++) {
        u32 c = qrow[dc * BC_ELEM_BITS / 8];
#if BC_ELEM_BITS == 4
        c = (c >> (4 * ((dc & 1) ^ BC_PACK_HIGH_FIRST))) & 0xFu;
#endif
        float a, unused;
        bc_decode2(c, &a, &unused);
        bc_store_hp(orow, dc, bc_dq_value(a, bc_dq_scale_bits(scale, bc_dq_off(sl, dr, dc)), ts));
      }
    }
  }
}
#else
// The scale of element j of a flat slot: sc0 before cut byte 0, sc1 before cut byte 1, sc2 after.
static __device__ __forceinline__ u32 bc_dq_pick(const u32 *sc, u32 cut, int j) {
  return j < (int)(cut & 0xFFu) ? sc[0] : j < (int)(cut >> 8) ? sc[1] : sc[2];
}

// Element e of the whole tensor, element by element (the short last slot; rows shorter than 8).
static __device__ __forceinline__ void bc_dq_elem(const u8 *__restrict__ q, i64 dcols, const void *__restrict__ scale,
                                                  const bc_sl &sl, const bc_tensor_scale &ts, BC_DTYPE_T *__restrict__ out,
                                                  i64 e) {
  u32 c = q[e * BC_ELEM_BITS / 8];
#if BC_ELEM_BITS == 4
  c = (c >> (4 * ((e & 1) ^ BC_PACK_HIGH_FIRST))) & 0xFu;
#endif
  float a, unused;
  bc_decode2(c, &a, &unused);
  bc_store_hp(out, e, bc_dq_value(a, bc_dq_scale_bits(scale, bc_dq_off(sl, e / dcols, e % dcols)), ts));
}

#if BC_SLOT_SCALES == 1
#define BC_FLAT_SCALES 3 /* this row's block, its next block, the next row's first block */
#else
#define BC_FLAT_SCALES BC_SLOT
#endif

extern "C" __global__ void __launch_bounds__(BC_THREADS, BC_MIN_BLOCKS)
${KERNEL}(const u8 *__restrict__ q, i64 drows, i64 dcols, const void *__restrict__ scale, bc_sl sl,
          const float *__restrict__ global_amax, BC_DTYPE_T *__restrict__ out, i64 ld, int q_vec, int out_vec) {
  const bc_tensor_scale ts = bc_tensor_scale_from_amax(global_amax);
  const i64 total = drows * dcols;
  // slots wholly inside the tensor; with rows shorter than a slot, none take the vector path
  const i64 whole = dcols >= BC_SLOT ? total / BC_SLOT : 0;
  const double inv = 1.0 / (double)dcols;
  const i64 base = (i64)blockIdx.x * BC_UNROLL * BC_THREADS + threadIdx.x;
  const i64 step = BC_DATA_IS_VIEW || (BC_VBR != 1 && !sl.per_row) ? 0 : sl.order == 1 ? 1 : sl.order == 0 ? sl.ld : 0;
  u32 w[BC_UNROLL][BC_SLOT_WORDS], sc[BC_UNROLL][BC_FLAT_SCALES];
#if BC_SLOT_SCALES == 1
  u32 cut[BC_UNROLL];
#endif
#pragma unroll
  for (int u = 0; u < BC_UNROLL; u++) {
    const i64 s = base + (i64)u * BC_THREADS;
    if (s >= whole) break;
#if BC_SLOT_BYTES == 8
    const uint2 v = *(const uint2 *)(q + s * BC_SLOT_BYTES);
    w[u][0] = v.x;
    w[u][1] = v.y;
#else
    w[u][0] = *(const u32 *)(q + s * BC_SLOT_BYTES);
#endif
    // the slot's first element (dr, dc0); n1 of its elements lie in row dr, the rest in dr + 1
    const i64 e0 = s * BC_SLOT;
    i64 dr = (i64)((double)e0 * inv), dc0 = e0 - dr * dcols;
    if (dc0 < 0) { dr--; dc0 += dcols; }
    else if (dc0 >= dcols) { dr++; dc0 -= dcols; }
    const int n1 = dcols - dc0 < BC_SLOT ? (int)(dcols - dc0) : BC_SLOT;
#if BC_SLOT_SCALES == 1
    // blocks of 8+ along the row: at most one block boundary before the row end
    const int b = (int)(BC_VBC - dc0 % BC_VBC), c1 = b < n1 ? b : n1;
    sc[u][0] = bc_dq_scale_bits(scale, bc_dq_off(sl, dr, dc0));
    sc[u][1] = c1 < n1 ? bc_dq_scale_bits(scale, bc_dq_off(sl, dr, dc0 + c1)) : sc[u][0];
    sc[u][2] = n1 < BC_SLOT ? bc_dq_scale_bits(scale, bc_dq_off(sl, dr + 1, 0)) : sc[u][1];
    cut[u] = (u32)c1 | (u32)n1 << 8;
#else
    const i64 off = bc_dq_off(sl, dr, dc0);
#if BC_SCALE_BYTES == 1
    if (n1 == BC_SLOT && step == 1 && ((size_t)((const u8 *)scale + off) & 7) == 0) {
      const uint2 v = *(const uint2 *)((const u8 *)scale + off);
#pragma unroll
      for (int j = 0; j < BC_SLOT; j++) sc[u][j] = ((j < 4 ? v.x : v.y) >> (8 * (j & 3))) & 0xFFu;
    } else
#endif
#pragma unroll
    for (int j = 0; j < BC_SLOT; j++)
      sc[u][j] = bc_dq_scale_bits(scale, n1 == BC_SLOT && step ? off + j * step
                                         : j < n1 ? bc_dq_off(sl, dr, dc0 + j) : bc_dq_off(sl, dr + 1, dc0 + j - dcols));
#endif
  }
#pragma unroll
  for (int u = 0; u < BC_UNROLL; u++) {
    const i64 s = base + (i64)u * BC_THREADS;
    if (s >= whole) break;
    float f[BC_SLOT];
#pragma unroll
    for (int j = 0; j < BC_SLOT; j += 2) {
      bc_decode2(bc_dq_pair(w[u], j), &f[j], &f[j + 1]);
#if BC_SLOT_SCALES == 1
      f[j] = bc_dq_value(f[j], bc_dq_pick(sc[u], cut[u], j), ts);
      f[j + 1] = bc_dq_value(f[j + 1], bc_dq_pick(sc[u], cut[u], j + 1), ts);
#else
      f[j] = bc_dq_value(f[j], sc[u][j], ts);
      f[j + 1] = bc_dq_value(f[j + 1], sc[u][j + 1], ts);
#endif
    }
    BC_DTYPE_T *dst = out + s * BC_SLOT;
#if BC_DTYPE == 0
    *(uint4 *)dst = make_uint4(bc_f32_bits_canonical(f[0]), bc_f32_bits_canonical(f[1]), bc_f32_bits_canonical(f[2]),
                               bc_f32_bits_canonical(f[3]));
    *(uint4 *)(dst + 4) = make_uint4(bc_f32_bits_canonical(f[4]), bc_f32_bits_canonical(f[5]), bc_f32_bits_canonical(f[6]),
                                     bc_f32_bits_canonical(f[7]));
#else
    *(uint4 *)dst = make_uint4(bc_pack2_hp(f[0], f[1]), bc_pack2_hp(f[2], f[3]), bc_pack2_hp(f[4], f[5]),
                               bc_pack2_hp(f[6], f[7]));
#endif
  }
  // element by element: the short last slot of the tensor (the thread whose slot `whole` would
  // be), or all slots of this thread when rows are shorter than a slot
#pragma unroll 1
  for (int u = 0; u < BC_UNROLL; u++) {
    const i64 s = base + (i64)u * BC_THREADS;
    if (s < whole || s * BC_SLOT >= total) continue;
#pragma unroll 1
    for (i64 e = s * BC_SLOT; e < total && e < (s + 1) * BC_SLOT; e++) bc_dq_elem(q, dcols, scale, sl, ts, out, e);
  }
}
#endif
