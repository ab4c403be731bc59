// templates/dequantize_block.cu: block-scaled dequantize of one direction (BC_DEQ_ROWWISE or
// columnwise), every block format:
//   out[dr, dc] = dtype(decode(q[dr, dc]) * scale)         (two-level: (q * s) * S_dec)
// q is the stored data matrix [drows, dcols] (sub-byte elements packed as the spec says:
// common.cuh, bc_code_pos); out has the same shape with row stride ld. The view (whose rows hold the blocks) is
// the data itself (BC_DATA_IS_VIEW) or its transpose (MXFP8 columnwise); the element's block in
// the view is BC_VBR x BC_VBC and its scale entry is found through the scale layout bc_sl.
//
// A slot is 8 consecutive elements; codes and scales of all of a thread's slots are loaded before
// the first conversion. Two kernels cut the tensor into slots:
//  - by row (BC_DQ_FLAT 0): slot s of row dr is its elements [8s, 8s + 8). A thread converts
//    BC_UNROLL slots of a row that lie BC_THREADS apart, so each warp instruction loads and
//    stores whole lines; y strides over the rows. A slot inside the row is loaded as one vector
//    (6-bit codes: three 2-byte pieces) when the data rows are aligned (q_vec), byte-wise otherwise, and stored as vectors when the
//    output rows are aligned (out_vec), element-wise otherwise. The short last slot of a row
//    (dcols not a multiple of 8) goes element by element after the unrolled loop.
//  - flat (BC_DQ_FLAT 1, the __flat kernel: the host's choice for a contiguous output whose rows
//    are not aligned): slot s is elements [8s, 8s + 8) of the whole tensor, so every slot is one
//    aligned vector load and store, and BC_UNROLL slots BC_THREADS apart per thread over one 1D
//    grid. A thread's first slot's row comes from a float64 reciprocal of dcols (exact after one
//    correction), the next ones by adding BC_THREADS slots. A slot inside a row may cross one
//    block boundary (two scales, chosen per element); a slot that crosses a row end (about one
//    per row) looks up every element's scale, after the unrolled loops. Only the tensor's short
//    last slot, and every slot when rows are shorter than a slot, go element by element.

#define BC_SLOT 8
#define BC_SLOT_BYTES (BC_SLOT * BC_ELEM_BITS / 8)
#define BC_SLOT_WORDS ((BC_SLOT_BYTES + 3) / 4)
#define BC_SLOT_UNIT (BC_SLOT_BYTES & -BC_SLOT_BYTES)      /* a slot's loads: 8, 4, 2 bytes (6 bits: 3 x 2) */
#if BC_SLOT % BC_PACK_GE
#error "a slot must hold whole packing groups"
#endif
#if BC_DATA_IS_VIEW && BC_VBC >= BC_SLOT && BC_VBC % BC_SLOT == 0
#define BC_SLOT_SCALES 1 /* the slot lies in one block */
#else
#define BC_SLOT_SCALES BC_SLOT
#endif
// data rows the by-row kernel takes as a group: untransposed columnwise data (view blocks of
// BC_VBC data rows down a column; groups start at multiples of 4) reuses a slot's 8 scale
// entries for 4 rows (the host launches a quarter of the block rows: runtime/ops/bc_ops.c)
#if !BC_DATA_IS_VIEW && BC_VBC % 4 == 0
#define BC_DQ_ROWS 4
#else
#define BC_DQ_ROWS 1
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

// An element's value from its decoded code and its block's factor bc_scale_dec(entry).
static __device__ __forceinline__ float bc_dq_value(float decoded, float factor, const bc_tensor_scale &ts) {
#if BC_RULE == 3
  return __fmul_rn(__fmul_rn(decoded, factor), ts.dec);
#else
  return __fmul_rn(decoded, factor);
#endif
}

// Codes j and j + 1 of a slot (j even) as one pair for bc_decode2: element j in the low bits.
// (j is a compile-time constant: the word index and the straddle test fold away.)
static __device__ __forceinline__ u32 bc_dq_pair(const u32 *w, int j) {
  return bc_pair_order(bc_get_at(w, bc_pair_pos(j), 2 * BC_ELEM_BITS));  // bits above the pair: ignored by bc_decode2
}

// Aligned loads of a slot's codes (src BC_SLOT_UNIT-byte aligned): one 8- or 4-byte vector, or
// 2-byte pieces.
static __device__ __forceinline__ void bc_dq_load_slot(const u8 *__restrict__ src, u32 *w) {
#if BC_SLOT_BYTES == 8
  const uint2 v = *(const uint2 *)src;
  w[0] = v.x;
  w[1] = v.y;
#elif BC_SLOT_BYTES == 4
  w[0] = *(const u32 *)src;
#else
#pragma unroll
  for (int i = 0; i < BC_SLOT_WORDS; i++) w[i] = 0u;
#pragma unroll
  for (int i = 0; i < BC_SLOT_BYTES / BC_SLOT_UNIT; i++)
    w[(i * BC_SLOT_UNIT) >> 2] |= (u32)((const u16 *)src)[i] << (8 * ((i * BC_SLOT_UNIT) & 3));
#endif
}

// Data columnwise to the view (not transposed, 1xN view blocks): the scale entries of a slot's
// elements are consecutive view rows, this far apart in a compact layout (0: look each one up).
static __device__ __forceinline__ i64 bc_dq_step(const bc_sl &sl) {
  return BC_DATA_IS_VIEW || (BC_VBR != 1 && !sl.per_row) ? 0 : sl.order == 1 ? 1 : sl.order == 0 ? sl.ld : 0;
}

// A slot's scale words: one entry (BC_SLOT_SCALES 1), or the 8 elements' entries; in the by-row
// kernel one-byte entries stay packed four to a word (entry j in byte j % 4 of word j / 4,
// unpacked where used: 24 registers per slot fewer; MXFP8 columnwise spilled 76 bytes at 64
// registers with them unpacked, 61% -> 74% of the copy without). The flat kernel looks most of its
// entries up one by one, where packing costs more than it saves.
#if BC_SLOT_SCALES == 1
#define BC_SC_WORDS 1
#define BC_SC_GET(sc, j) ((sc)[0])
#elif BC_SCALE_BYTES == 1 && !BC_DQ_FLAT
#define BC_SC_WORDS 2
#define BC_SC_GET(sc, j) (((sc)[(j) >> 2] >> (8 * ((j) & 3))) & 0xFFu)
#else
#define BC_SC_WORDS BC_SLOT
#define BC_SC_GET(sc, j) ((sc)[j])
#endif

#if BC_SLOT_SCALES != 1
// The scale words of the 8 elements (dr, dc0 + j) of a slot inside one row, for views whose slot
// holds several blocks: eight consecutive one-byte entries (step 1, aligned) as one load,
// otherwise each entry `step` apart or, with step 0, looked up.
static __device__ __forceinline__ void bc_dq_scales8(const void *__restrict__ scale, const bc_sl &sl, i64 dr, i64 dc0,
                                                     i64 step, u32 *sc) {
  const i64 off = bc_dq_off(sl, dr, dc0);
#if BC_SCALE_BYTES == 1
  if (step == 1 && ((size_t)((const u8 *)scale + off) & 7) == 0) {
    const uint2 v = *(const uint2 *)((const u8 *)scale + off);
#if BC_SC_WORDS == 2
    sc[0] = v.x;
    sc[1] = v.y;
#else
#pragma unroll
    for (int j = 0; j < BC_SLOT; j++) sc[j] = ((j < 4 ? v.x : v.y) >> (8 * (j & 3))) & 0xFFu;
#endif
    return;
  }
#endif
#if BC_SC_WORDS == 2
  sc[0] = sc[1] = 0u;
#pragma unroll
  for (int j = 0; j < BC_SLOT; j++)
    sc[j >> 2] |= bc_dq_scale_bits(scale, step ? off + j * step : bc_dq_off(sl, dr, dc0 + j)) << (8 * (j & 3));
#else
#pragma unroll
  for (int j = 0; j < BC_SLOT; j++) sc[j] = bc_dq_scale_bits(scale, step ? off + j * step : bc_dq_off(sl, dr, dc0 + j));
#endif
}
#endif

#if BC_SC_WORDS == 2 && (BC_RULE == 1 || BC_RULE == 2)
// Whether a word of four e8m0 entries holds a 0 or a 255 (the entries bc_e8m0_dec does not decode
// by placing the byte): a zero byte of w or of ~w.
static __device__ __forceinline__ bool bc_dq_e8m0_special(u32 w) {
  const u32 n = ~w;
  return (((w - 0x01010101u) & ~w) | ((n - 0x01010101u) & ~n)) & 0x80808080u;
}
// Entry k (byte k of w, 1 to 254) as its factor 2^(e - 127): the byte at fp32's exponent field.
static __device__ __forceinline__ float bc_dq_e8m0_plain(u32 w, int k) {
  return __uint_as_float((k == 3 ? w >> 1 : w << (23 - 8 * k)) & 0x7F800000u);
}
#endif

// A slot's codes w, element j's block factor factor_of(j) (bc_scale_dec of its entry: the callers
// decode each distinct entry once, which for the ue4m3 scales of NVFP4 was most of a slot's
// work) -> the output words h: 8 canonical fp32 bit patterns, or 4 words of two 16-bit values
// (element 2j in the low half).
#define BC_SLOT_OUT_WORDS (BC_DTYPE == 0 ? BC_SLOT : BC_SLOT / 2)
template <class F>
static __device__ __forceinline__ void bc_dq_convert(const u32 *w, F factor_of, const bc_tensor_scale &ts, u32 *h) {
  float f[BC_SLOT];
#pragma unroll
  for (int j = 0; j < BC_SLOT; j += 2) {
    bc_decode2(bc_dq_pair(w, j), &f[j], &f[j + 1]);
    f[j] = bc_dq_value(f[j], factor_of(j), ts);
    f[j + 1] = bc_dq_value(f[j + 1], factor_of(j + 1), ts);
  }
#if BC_DTYPE == 0
#pragma unroll
  for (int j = 0; j < BC_SLOT; j++) h[j] = bc_f32_bits_canonical(f[j]);
#else
#pragma unroll
  for (int j = 0; j < BC_SLOT / 2; j++) h[j] = bc_pack2_raw(f[2 * j], f[2 * j + 1]);
  bc_canon_nan2<BC_SLOT / 2>(h);
#endif
}

#if BC_SLOT_SCALES == 1 && BC_ELEM_F16_PLACE
// The plain slot (elements without NaN or Inf codes, decoded by placing their bits in an fp16):
// when the slot's factor f0 is finite and at most 2^(127 - k) (BC_ELEM_F16_UP = 2^k, k >= 8) and
// the two-level factor ts.dec is finite, f0 * 2^k is exact, so decode's power of two folds into
// the factor (the same products, rounded once, as bc_dq_convert's) and no product can be NaN
// (finite times finite), so the NaN canonicalization of the output goes: about a third of the
// slot's instructions (ncu, MXFP6 rowwise dequantize: 22 instructions an element). Both kernels
// take it (flat: when both of the slot's factors are plain).
#define BC_DQ_FOLD_MAX __uint_as_float((u32)(254 - (15 - BC_ELEM_BIAS)) << 23)
static __device__ __forceinline__ bool bc_dq_plain(float f0, bool dec_finite) { return f0 <= BC_DQ_FOLD_MAX && dec_finite; }
// (folded_of(j): element j's factor times BC_ELEM_F16_UP, every factor of the slot plain)
template <class F>
static __device__ __forceinline__ void bc_dq_convert_plain(const u32 *w, F folded_of, const bc_tensor_scale &ts, u32 *h) {
  float f[BC_SLOT];
#pragma unroll
  for (int j = 0; j < BC_SLOT; j += 2) {
    bc_decode2_placed(bc_dq_pair(w, j), &f[j], &f[j + 1]);
    f[j] = bc_dq_value(f[j], folded_of(j), ts);
    f[j + 1] = bc_dq_value(f[j + 1], folded_of(j + 1), ts);
  }
#if BC_DTYPE == 0
#pragma unroll
  for (int j = 0; j < BC_SLOT; j++) h[j] = __float_as_uint(f[j]);
#else
#pragma unroll
  for (int j = 0; j < BC_SLOT / 2; j++) h[j] = bc_pack2_raw(f[2 * j], f[2 * j + 1]);
#endif
}
#endif

// A converted slot as aligned vector stores.
static __device__ __forceinline__ void bc_dq_store_vec(BC_DTYPE_T *__restrict__ dst, const u32 *h) {
  *(uint4 *)dst = make_uint4(h[0], h[1], h[2], h[3]);
#if BC_DTYPE == 0
  *(uint4 *)(dst + 4) = make_uint4(h[4], h[5], h[6], h[7]);
#endif
}

// Code qi of q, dequantized with scale bits sb into out[oi] (element-wise paths).
static __device__ __forceinline__ void bc_dq_one(const u8 *__restrict__ q, i64 qi, BC_DTYPE_T *__restrict__ out, i64 oi,
                                                 u32 sb, const bc_tensor_scale &ts) {
  // its bit in the code stream (rows hold whole packing groups, so each row starts one); codes of
  // one-byte groups never straddle a byte
  const i64 bit = bc_code_pos(qi);
  const int sh = (int)(bit & 7);
  u32 c = q[bit >> 3];
  if (BC_PACK_GB > 1 && sh + BC_ELEM_BITS > 8) c |= (u32)q[(bit >> 3) + 1] << 8;
  c = (c >> sh) & ((1u << BC_ELEM_BITS) - 1u);
  float a, unused;
  bc_decode2(c, &a, &unused);
  bc_store_hp(out, oi, bc_dq_value(a, bc_scale_dec(sb), ts));
}

#if !BC_DQ_FLAT
extern "C" __global__ void __launch_bounds__(BC_THREADS, BC_MIN_BLOCKS)
${KERNEL}(const u8 *__restrict__ q, i64 drows, i64 dcols, const void *__restrict__ scale, bc_sl sl,
          const float *__restrict__ global_amax, BC_DTYPE_T *__restrict__ out, i64 ld, int q_vec, int out_vec) {
  const bc_tensor_scale ts = bc_tensor_scale_from_amax(global_amax);
  const i64 row_bytes = dcols * BC_ELEM_BITS / 8;
  const i64 full = dcols / BC_SLOT, slots = (dcols + BC_SLOT - 1) / BC_SLOT;
  const i64 base = (i64)BC_BID.x * BC_UNROLL * BC_THREADS + threadIdx.x;
  const i64 step = bc_dq_step(sl);
#if BC_SLOT_SCALES == 1 && BC_ELEM_F16_PLACE
  const bool dec_finite = __fsub_rn(ts.dec, ts.dec) == 0.0f;
#endif
  // y: groups of BC_DQ_ROWS consecutive data rows (block row y takes groups y, y + gdim.y, ...);
  // a group's rows share their scale entries, loaded with its first row
  u32 sc[BC_UNROLL][BC_SC_WORDS];
#pragma unroll 1
  for (i64 dr = (i64)BC_BID.y * BC_DQ_ROWS; dr < drows;
       dr += dr % BC_DQ_ROWS == BC_DQ_ROWS - 1 ? 1 + ((i64)BC_GDIM.y - 1) * BC_DQ_ROWS : 1) {
    const bool first = dr % BC_DQ_ROWS == 0;
    const u8 *qrow = q + dr * row_bytes;
    BC_DTYPE_T *orow = out + dr * ld;
    u32 w[BC_UNROLL][BC_SLOT_WORDS];
#pragma unroll
    for (int u = 0; u < BC_UNROLL; u++) {
      const i64 s = base + (i64)u * BC_THREADS;
      if (s >= full) break;
      const u8 *src = qrow + s * BC_SLOT_BYTES;
      if (q_vec) {
        bc_dq_load_slot(src, w[u]);
      } else {
#pragma unroll
        for (int i = 0; i < BC_SLOT_WORDS; i++) w[u][i] = 0u;
#pragma unroll
        for (int i = 0; i < BC_SLOT_BYTES; i++) w[u][i >> 2] |= (u32)src[i] << (8 * (i & 3));
      }
      if (first) {
#if BC_SLOT_SCALES == 1
        sc[u][0] = bc_dq_scale_bits(scale, bc_dq_off(sl, dr, s * BC_SLOT));
#else
        bc_dq_scales8(scale, sl, dr, s * BC_SLOT, step, sc[u]);
#endif
      }
    }
#pragma unroll
    for (int u = 0; u < BC_UNROLL; u++) {
      const i64 s = base + (i64)u * BC_THREADS;
      if (s >= full) break;
      u32 h[BC_SLOT_OUT_WORDS];
#if BC_SLOT_SCALES == 1
      const float f0 = bc_scale_dec(sc[u][0]);
#if BC_ELEM_F16_PLACE
      if (bc_dq_plain(f0, dec_finite)) {
        const float fu = __fmul_rn(f0, BC_ELEM_F16_UP);
        bc_dq_convert_plain(w[u], [=](int) { return fu; }, ts, h);
      } else
#endif
        bc_dq_convert(w[u], [=](int) { return f0; }, ts, h);
#elif BC_SC_WORDS == 2 && (BC_RULE == 1 || BC_RULE == 2)
      // e8m0 entries (a slot's 8, packed): when none is 0 (2^-127) or 255 (NaN), each factor is
      // its byte moved to fp32's exponent field, 2 instructions instead of bc_e8m0_dec's 5 and
      // the byte's extraction (MXFP8 columnwise: 8 entries a slot); else the general decode
      const u32 *su = sc[u];
      if (!bc_dq_e8m0_special(su[0]) && !bc_dq_e8m0_special(su[1]))
        bc_dq_convert(w[u], [&](int j) { return bc_dq_e8m0_plain(su[j >> 2], j & 3); }, ts, h);
      else
        bc_dq_convert(w[u], [&](int j) { return bc_scale_dec(BC_SC_GET(su, j)); }, ts, h);
#else
      const u32 *su = sc[u];
      bc_dq_convert(w[u], [&](int j) { return bc_scale_dec(BC_SC_GET(su, j)); }, ts, h);
#endif
      BC_DTYPE_T *dst = orow + s * BC_SLOT;
      if (out_vec) {
        bc_dq_store_vec(dst, h);
      } else {
#pragma unroll
#if BC_DTYPE == 0
        for (int j = 0; j < BC_SLOT; j++) ((u32 *)dst)[j] = h[j];
#else
        for (int j = 0; j < BC_SLOT; j++) dst[j] = (u16)(h[j >> 1] >> (16 * (j & 1)));
#endif
      }
    }
    // the short last slot of the row, element by element
    if (full < slots && base <= full && full < base + (i64)BC_UNROLL * BC_THREADS && (full - base) % BC_THREADS == 0) {
#pragma unroll 1
      for (i64 dc = full * BC_SLOT; dc < dcols; dc++)
        bc_dq_one(qrow, dc, orow, dc, bc_dq_scale_bits(scale, bc_dq_off(sl, dr, dc)), ts);
    }
  }
}
#else
// Row and column of flat element e (0 <= e < rows * dcols): a float64 reciprocal of dcols, then one
// correction (exact for e < 2^52).
static __device__ __forceinline__ void bc_dq_rc(i64 e, i64 dcols, double inv, i64 &r, i64 &c) {
  r = (i64)((double)e * inv);
  c = e - r * dcols;
  if (c < 0) { r--; c += dcols; }
  else if (c >= dcols) { r++; c -= dcols; }
}

// Convert slot s of the whole tensor (codes w, per-element scale bits e) and store it.
template <class F>
static __device__ __forceinline__ void bc_dq_flat_slot(BC_DTYPE_T *__restrict__ out, i64 s, const u32 *w, F factor_of,
                                                       const bc_tensor_scale &ts) {
  u32 h[BC_SLOT_OUT_WORDS];
  bc_dq_convert(w, factor_of, ts, h);
  bc_dq_store_vec(out + s * BC_SLOT, h);
}

extern "C" __global__ void __launch_bounds__(BC_THREADS, BC_MIN_BLOCKS)
${KERNEL}(const u8 *__restrict__ q, i64 drows, i64 dcols, const void *__restrict__ scale, bc_sl sl,
          const float *__restrict__ global_amax, BC_DTYPE_T *__restrict__ out, i64 ld, int q_vec, int out_vec) {
  const bc_tensor_scale ts = bc_tensor_scale_from_amax(global_amax);
  const i64 total = drows * dcols;
  // slots wholly inside the tensor; with rows shorter than a slot, none take the vector paths
  const i64 whole = dcols >= BC_SLOT ? total / BC_SLOT : 0;
  const double inv = 1.0 / (double)dcols;
  const i64 base = (i64)BC_BID.x * BC_UNROLL * BC_THREADS + threadIdx.x;
  const i64 step = bc_dq_step(sl);
#if BC_SLOT_SCALES == 1 && BC_ELEM_F16_PLACE
  const bool dec_finite = __fsub_rn(ts.dec, ts.dec) == 0.0f;
#endif
  u32 w[BC_UNROLL][BC_SLOT_WORDS], sc[BC_UNROLL][BC_SLOT_SCALES == 1 ? 2 : BC_SC_WORDS];
#if BC_SLOT_SCALES == 1
  int cut[BC_UNROLL]; // elements from cut on take sc[u][1] (the row's next block)
#endif
  u32 straddle = 0u;  // slots that run past their row's end: after the unrolled loops
  // the first slot's (row, column) from the reciprocal, the next ones BC_THREADS slots further
  i64 dr, dc0;
  bc_dq_rc(base * BC_SLOT, dcols, inv, dr, dc0);
#pragma unroll
  for (int u = 0; u < BC_UNROLL; u++) {
    const i64 s = base + (i64)u * BC_THREADS;
    if (s >= whole) break;
    if (u > 0) {
      dc0 += (i64)BC_THREADS * BC_SLOT;
      if (dc0 >= dcols) bc_dq_rc(s * BC_SLOT, dcols, inv, dr, dc0);
    }
    if (dc0 + BC_SLOT > dcols) {
      straddle |= 1u << u;
      continue;
    }
    bc_dq_load_slot(q + s * BC_SLOT_BYTES, w[u]);
#if BC_SLOT_SCALES == 1
    // blocks of 8+ along the row: at most one block boundary inside the slot
    const int b = (int)(BC_VBC - dc0 % BC_VBC);
    cut[u] = b < BC_SLOT ? b : BC_SLOT;
    sc[u][0] = bc_dq_scale_bits(scale, bc_dq_off(sl, dr, dc0));
    sc[u][1] = b < BC_SLOT ? bc_dq_scale_bits(scale, bc_dq_off(sl, dr, dc0 + b)) : sc[u][0];
#else
    bc_dq_scales8(scale, sl, dr, dc0, step, sc[u]);
#endif
  }
#pragma unroll
  for (int u = 0; u < BC_UNROLL; u++) {
    const i64 s = base + (i64)u * BC_THREADS;
    if (s >= whole) break;
    if ((straddle >> u) & 1u) continue;
#if BC_SLOT_SCALES == 1
    const float f0 = bc_scale_dec(sc[u][0]), f1 = bc_scale_dec(sc[u][1]);
    const int cu = cut[u];
#if BC_ELEM_F16_PLACE
    if (bc_dq_plain(f0, dec_finite) && bc_dq_plain(f1, dec_finite)) {
      const float fu0 = __fmul_rn(f0, BC_ELEM_F16_UP), fu1 = __fmul_rn(f1, BC_ELEM_F16_UP);
      u32 h[BC_SLOT_OUT_WORDS];
      bc_dq_convert_plain(w[u], [=](int j) { return j < cu ? fu0 : fu1; }, ts, h);
      bc_dq_store_vec(out + s * BC_SLOT, h);
    } else
#endif
      bc_dq_flat_slot(out, s, w[u], [=](int j) { return j < cu ? f0 : f1; }, ts);
#else
    const u32 *su = sc[u];
    bc_dq_flat_slot(out, s, w[u], [&](int j) { return bc_scale_dec(BC_SC_GET(su, j)); }, ts);
#endif
  }
  // slots that cross a row end (about one per row): still one vector load and store, the scale of
  // each element looked up (dcols >= 8: the slot ends in the next row)
#pragma unroll 1
  for (int u = 0; straddle >> u; u++) {
    if (!((straddle >> u) & 1u)) continue;
    const i64 s = base + (i64)u * BC_THREADS;
    i64 r, c;
    bc_dq_rc(s * BC_SLOT, dcols, inv, r, c);
    u32 ws[BC_SLOT_WORDS], e[BC_SLOT];
    bc_dq_load_slot(q + s * BC_SLOT_BYTES, ws);
#pragma unroll
    for (int j = 0; j < BC_SLOT; j++)
      e[j] = bc_dq_scale_bits(scale, c + j < dcols ? bc_dq_off(sl, r, c + j) : bc_dq_off(sl, r + 1, c + j - dcols));
    bc_dq_flat_slot(out, s, ws, [&](int j) { return bc_scale_dec(e[j]); }, ts);
  }
  // element by element: the short last slot of the tensor (the thread whose slot `whole` would
  // be), or all slots of this thread when rows are shorter than a slot. A thread's slots ascend
  // with u, so a thread whose last slot lies below `whole` has none of them: the test keeps the
  // loop's empty trips (32 instructions each, with the parameters its body reloads: 16% of MXFP8
  // row_flat's instructions, ncu) off every other thread.
  if (base + (i64)(BC_UNROLL - 1) * BC_THREADS >= whole) {
#pragma unroll 1
    for (int u = 0; u < BC_UNROLL; u++) {
      const i64 s = base + (i64)u * BC_THREADS;
      if (s < whole || s * BC_SLOT >= total) continue;
#pragma unroll 1
      for (i64 e = s * BC_SLOT; e < total && e < (s + 1) * BC_SLOT; e++)
        bc_dq_one(q, e, out, e, bc_dq_scale_bits(scale, bc_dq_off(sl, e / dcols, e % dcols)), ts);
    }
  }
}
#endif
