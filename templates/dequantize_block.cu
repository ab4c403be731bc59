// templates/dequantize_block.cu: block-scaled dequantize of one direction (BC_DEQ_ROWWISE or
// columnwise), every block format:
//   out[dr, dc] = dtype(decode(q[dr, dc]) * scale)         (two-level: (q * s) * S_dec)
// q is the stored data matrix [drows, dcols] (4-bit elements two per byte, nibble order from
// the spec); out has the same shape with row stride ld. The view (whose rows hold the blocks) is
// the data itself (BC_DATA_IS_VIEW) or its transpose (MXFP8 columnwise); the element's block in
// the view is BC_VBR x BC_VBC and its scale entry is found through the scale layout bc_sl.
//
// A slot is 8 consecutive elements of a data row. A thread converts BC_UNROLL slots of a row that
// lie BC_THREADS apart, so each warp instruction loads and stores whole lines; codes and scales
// of all of them are loaded before the first conversion; y strides over the rows. A slot inside
// the row is loaded as one vector when the data rows are aligned (q_vec), byte-wise otherwise, and
// stored as vectors when the output rows are aligned (out_vec), element-wise otherwise. The short
// last slot of a row (dcols not a multiple of 8) goes element by element after the unrolled loop.

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
