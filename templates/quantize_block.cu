// templates/quantize_block.cu: block-scaled quantize, every block format, rowwise and/or
// columnwise output from one read of the input. What differs between formats comes from the
// spec as constants: the block shape (BC_BR x BC_BC rowwise; columnwise BC_CBR x 1, or the same
// 2D block when BC_2D), the element (BC_ELEM_*, 8, 6 or 4 bits) and its packing (BC_PACK_*,
// common.cuh: bc_code_pos), the scale rule
// (BC_RULE, bc_block_scale), the columnwise data layout (BC_COL_TRANSPOSED) and the scale
// layouts (bc_sl, from the host). Stored columnwise data rows are col_ld bytes apart (the dense
// row, or a wider buffer's: the sharded cast writes a band of rows of the whole weight's
// transposed data in place); the scale layouts likewise carry their own ld.
//
// One CUDA block per BC_TR x BC_TC tile (whole blocks of every direction written):
//   load   the tile into shared memory as raw input bits (16-byte vectors when the tile is whole
//          and aligned, else element loads, masked at the edges; zeros outside the tensor); 2D:
//          block amaxes (pooled across a warp's lanes, then one shared atomic per block).
//          BC_ROWREG (kernels of 2D blocks from fp32, rowwise-only or with transposed 8-bit
//          columnwise codes): no staging; each thread loads the vectors of its own row tasks into
//          registers, pools the block amaxes from them, and the row part encodes from them
//          (BC_COLREG: also staging its codes transposed for the columnwise rows).
//   row    a task is a run of BC_RUN_R elements of one tile row (16, 24 or 32 output bytes) held in
//          registers: block amax (a block longer than the run is reduced across adjacent lanes)
//          -> scale (written) -> encode -> 16-byte stores; output rows that are not 16-byte
//          aligned, and 6-bit runs of 24 bytes (BC_ROW_STAGED), are staged in shared memory and
//          written by bc_write_rows as aligned 16-byte stores (to unaligned rows, each shifted out
//          of the staged bytes as it is written).
//   col    a task is two adjacent columns x BC_CH rows, read as one word per row (lanes on
//          consecutive column pairs: conflict-free), held in registers up to 16 rows: packed
//          block amax of both columns (a 1D block taller than BC_CH is reduced across the tasks
//          below it through shared memory) -> scales -> encode. Transposed output: the codes of
//          a tile column are staged in shared memory over the input tile and written as 16-byte
//          pieces along output rows (bc_write_rows); not transposed: one word of both columns
//          per row, straight to global memory.
// Amaxes of 16-bit inputs are taken on packed pairs (max.bf16x2 / max.f16x2 of the absolute
// values; NaN ignored as fmaxf does, or kept under BC_NAN_SCALE; exact, every 16-bit value is an
// fp32 value).
// CUDA blocks past the last tile zero the scale padding of both directions.
// Stochastic rounding (sr != 0, BC_SR_ALLOWED): element e of a direction's stream takes its
// random bits from Philox(e / 4, offset; seed); the rowwise stream is e = r * cols + c, the
// columnwise one e = rows * cols + c * rows + r, independent of tiles and launch shape.

#define BC_S BC_DTYPE_SIZE
#define BC_VE BC_VEC                                       /* elements per 16-byte vector */
#define BC_TS (BC_TC * BC_S + 16)                          /* staged row stride, bytes */
#define BC_VPR (BC_TC * BC_S / 16)                         /* vectors per tile row */
#define BC_NLOAD (BC_TR * BC_VPR / BC_THREADS)             /* vectors per thread */
/* rowwise run: BC_RUN_R elements (set by the generator, gen/blockcast.lua: launch_of), whole 16-byte
   pieces of codes except 6-bit's 32 elements (24 bytes), whose runs are always staged in shared
   memory and written as 16-byte pieces (BC_ROW_STAGED, also the generator's) */
#if !defined(BC_RUN_R) || !defined(BC_ROW_STAGED)
#error "BC_RUN_R and BC_ROW_STAGED are set by gen/blockcast.lua"
#endif
#define BC_RUN_BYTES (BC_RUN_R * BC_ELEM_BITS / 8)
#define BC_NV_R (BC_RUN_R * BC_S / 16)                     /* input vectors of a rowwise run */
#define BC_LANES_R (BC_BC > BC_RUN_R ? BC_BC / BC_RUN_R : 1)  /* lanes sharing a rowwise block */
#define BC_NBLK_R (BC_BC > BC_RUN_R ? 1 : BC_RUN_R / BC_BC)  /* blocks per row task */
#define BC_BMAX_COLS (BC_TC / BC_BC)
#define BC_CG (BC_TC / 2)                                  /* column pairs of the tile */
#define BC_CSEG (BC_TR / BC_CH)                            /* row runs of a column */
#define BC_CTASKS (BC_CG * BC_CSEG)
#define BC_CNB (BC_CBR < BC_CH ? BC_CH / BC_CBR : 1)        /* column blocks per task */
#define BC_CBH (BC_CBR < BC_CH ? BC_CBR : BC_CH)            /* rows of a task in one block */
#define BC_CSHARE (!BC_2D && BC_CBR > BC_CH ? BC_CBR / BC_CH : 1)  /* tasks sharing a 1D block */
#define BC_CW (BC_CH * BC_ELEM_BITS / 32)                  /* code words of a task's column */
#define BC_OB (BC_TR * BC_ELEM_BITS / 8)                   /* code bytes of a tile column */
/* staged code row stride, bytes: lane g stages output rows 2g, 2g + 1, so a stride of 64 bytes
   (6-bit codes: 48 + 16) would put a warp's 32 lanes on one bank; 80 spreads them like 8-bit's */
#define BC_CSTRIDE ((BC_OB + 16) % 64 ? BC_OB + 16 : BC_OB + 32)
#define BC_CHOLD (BC_CH <= 16)                             /* column words held in registers */
/* a rowwise run of several blocks of one-byte scales (NVFP4's 1x16 blocks: two a 32-element run)
   writes them with one store where the layout allows (bc_write_scales_n): from fp32 inputs, where
   it was measured faster (H200, 16384^2: NVFP4 "both" 437.5 -> 425.0 us, rowwise 325.4 -> 322.0, the
   sharded cast's NVFP4 step 1.40 -> 1.37x its floor); from bf16 the rowwise kernel ran 2.5% slower
   (188.7 -> 193.5 us) and "both" the same, so 16-bit inputs keep a store a block
   (tests/bench/NOTES.md, "NVFP4's two rowwise scales of a run in one store") */
#define BC_ROW_SCALES_N (!BC_2D && BC_S == 4 && BC_NBLK_R > 1 && BC_SCALE_BYTES == 1 && (BC_NBLK_R == 2 || BC_NBLK_R == 4))
/* elements encoded through a wider conversion, low_first: codes four at a time, one squeezed word
   each (common.cuh: bc_encode4); other elements pair by pair */
#define BC_QUAD (BC_ELEM_VIA && !BC_PACK_HIGH_FIRST)
/* and with power-of-two block factors (e8m0 rules, pow2 scales) the via scale 2^k is folded into
   the factor: one multiply per element instead of two (common.cuh: bc_encode4_scaled) */
#define BC_QUAD_FOLD (BC_QUAD && (BC_RULE == 1 || BC_RULE == 2 || (BC_RULE == 0 && BC_SCALE_POW2)))
#define BC_RSTRIDE (BC_TC * BC_ELEM_BITS / 8 + 16)         /* staged rowwise code row, bytes */
#define BC_RPR (BC_TC / BC_RUN_R)                          /* rowwise runs per tile row */
#define BC_NTJ (BC_TR * BC_RPR / BC_THREADS)                 /* rowwise runs per thread */
/* rowwise-only kernels of 2D blocks from fp32 keep the tile in registers: each thread loads the
   vectors of its own runs (run j: task tid + j * BC_THREADS), the block amaxes are pooled from
   there and the runs encoded from there, with no staging in shared memory (H100, 128x128 blocks:
   16384^2 522 -> 436 us at 512 threads, 8191x8193 166 -> 155; tests/bench/NOTES.md, "Rowwise 2D
   blocks from registers"). Not 16-bit inputs (their staged kernel runs at the copy's speed, and
   their element loads of ragged rows, lanes a run apart, ran 53% slower: 8191x8193 bf16 111 -> 170
   us), not 1D blocks (MXFP4 / MXFP6 rowwise 14-18% slower at 16384^2), not where stochastic
   rounding may run (it reads staged elements one by one; ptxas spilled 84-700 bytes with both).
   The launch keeps the tile's shared memory (the layout below is the same): at the 2 blocks an SM
   their registers allow, it costs no occupancy.
   BC_COLREG: the same for the columnwise output of such kernels where it is transposed 8-bit
   codes: a 2D block's columnwise codes are its rowwise ones (one scale, one element), so each
   run's codes are staged transposed in shared memory as they are encoded and written out as the
   columnwise rows; no columnwise encode. */
#define BC_REG_OK (BC_2D && BC_S == 4 && !BC_SR_ALLOWED && (BC_TR * BC_RPR) % BC_THREADS == 0 && BC_THREADS % BC_RPR == 0 && \
                   BC_BC % BC_VE == 0)
#define BC_COLREG (BC_REG_OK && BC_COLUMNWISE && BC_COL_TRANSPOSED && BC_ELEM_BITS == 8 && !BC_CSCALES)
#define BC_ROWREG (BC_REG_OK && (BC_COLREG || !BC_COLUMNWISE))
// shared memory: the tile [BC_TR x BC_TS], then the 2D block amaxes, the column partial amaxes and
// the staged columnwise scales (BC_CSCALES, below), each where the kernel has them: the launch's
// size BC_SMEM. Past it, only when the rowwise output rows are not 16-byte aligned, the
// staged rowwise codes [BC_TR x BC_RSTRIDE] (the host adds those bytes to that launch:
// runtime/bc_ops.c, block_cast_launch).
/* BC_CSCALES (set by the generator, which counts the bytes: gen/blockcast.lua, M.launch): transposed
   columnwise data whose scale layout has an entry per input column (1D blocks; 2D blocks whose
   scale is repeated per row, index = "row"): the tile's columnwise scales are staged (BC_TC columns
   x BC_CSB blocks, after the block or partial amaxes) and written out after the codes' barrier,
   consecutive lanes along the layout's contiguous direction. Written from the column tasks
   directly, a warp's 64 one-byte stores into a compact layout fell in 64 sectors: as many L2 writes
   as the tile's input reads, and NVFP4 columnwise ran at 96% of the L2's throughput (H100;
   tests/bench/NOTES.md). */
#ifndef BC_CSCALES
#error "BC_CSCALES is set by gen/blockcast.lua"
#endif
#define BC_CSB (BC_TR / BC_CBR)                            /* columnwise blocks of a tile column */
#define BC_BMAX_BYTES (BC_2D ? 4 * (BC_TR / BC_BR) * (BC_TC / BC_BC) : 0)
#define BC_PART_BYTES (BC_COLUMNWISE && BC_CSHARE > 1 ? BC_CG * BC_CSEG * 2 * BC_S : 0)
#define BC_AUX_BYTES ((BC_BMAX_BYTES + BC_PART_BYTES + (BC_CSCALES ? BC_TC * BC_CSB * BC_SCALE_BYTES : 0)) + 15) / 16 * 16
#define BC_RCODES_OFF (BC_TR * BC_TS + BC_AUX_BYTES)
#if BC_RCODES_OFF != BC_SMEM
#error "shared memory layout differs from the launch's size (gen/blockcast.lua: M.launch)"
#endif

/* the staged rowwise codes' bytes the host adds to a launch (BC_ROW_SMEM, the generator's launch
   record row_smem: runtime/ops/bc_ops.c) are this layout's */
#if !defined(BC_ROW_SMEM) || BC_ROW_SMEM != (BC_ROWWISE ? BC_TR * BC_RSTRIDE : 0)
#error "BC_ROW_SMEM differs from the staged rowwise codes' layout (gen/blockcast.lua: launch_of, row_smem)"
#endif
#if BC_ROWWISE && BC_ROW_STAGED != (BC_RUN_BYTES % 16 != 0)
#error "BC_ROW_STAGED: staged rowwise runs are those that are not whole 16-byte pieces"
#endif
#if (BC_TR * BC_VPR) % BC_THREADS || (BC_ROWWISE && BC_TC % BC_RUN_R) || (BC_COLUMNWISE && BC_TR % BC_CH) || \
    (BC_2D && (BC_TR % BC_BR || BC_TC % BC_BC)) || (BC_COLUMNWISE && BC_CTASKS > BC_THREADS) ||                 \
    (BC_COLUMNWISE && (BC_CH % (BC_QUAD ? 4 : 2) || (BC_CSHARE > 1 && BC_TR % BC_CBR))) ||                                          \
    (BC_COLUMNWISE && BC_COL_TRANSPOSED && (BC_CW < 1 || BC_OB % 16 || BC_TC * BC_CSTRIDE > BC_TR * BC_TS)) ||   \
    (BC_COLUMNWISE && BC_CH % BC_PACK_WE) || (BC_ROWWISE && (BC_RUN_BYTES % (4 * BC_PACK_WG) || BC_RUN_BYTES % 8)) || \
    (BC_ROWWISE && BC_RSTRIDE % 16)
#error "tile does not hold whole blocks, loads or column tasks (gen/blockcast.lua: block_tile, block_col_rows)"
#endif

// ---- two adjacent input elements of one row (a column pair), as raw bits
#if BC_S == 4
typedef uint2 bc_pw;
static __device__ __forceinline__ bc_pw bc_pw_ld(const u8 *p) { return *(const uint2 *)p; }
static __device__ __forceinline__ bc_pw bc_pw_zero() { return make_uint2(0u, 0u); }
static __device__ __forceinline__ float bc_pw_lo(bc_pw v) { return __uint_as_float(v.x); }
static __device__ __forceinline__ float bc_pw_hi(bc_pw v) { return __uint_as_float(v.y); }
// m (absolute values so far) and |v|, element-wise max; NaN ignored (kept: BC_NAN_SCALE)
static __device__ __forceinline__ bc_pw bc_pw_absmax(bc_pw m, bc_pw v) {
  return make_uint2(__float_as_uint(bc_bmax(__uint_as_float(m.x), fabsf(__uint_as_float(v.x)))),
                    __float_as_uint(bc_bmax(__uint_as_float(m.y), fabsf(__uint_as_float(v.y)))));
}
static __device__ __forceinline__ bc_pw bc_pw_absmax16(bc_pw m, uint4 u) {
  return bc_pw_absmax(bc_pw_absmax(m, make_uint2(u.x, u.y)), make_uint2(u.z, u.w));
}
#else
typedef u32 bc_pw;
static __device__ __forceinline__ bc_pw bc_pw_ld(const u8 *p) { return *(const u32 *)p; }
static __device__ __forceinline__ bc_pw bc_pw_zero() { return 0u; }
#if BC_DTYPE == 1
static __device__ __forceinline__ float bc_pw_lo(bc_pw v) { return __uint_as_float(v << 16); }
static __device__ __forceinline__ float bc_pw_hi(bc_pw v) { return __uint_as_float(v & 0xFFFF0000u); }
#else
static __device__ __forceinline__ float bc_pw_lo(bc_pw v) { return bc_f32_from_f16((u16)(v & 0xFFFFu)); }
static __device__ __forceinline__ float bc_pw_hi(bc_pw v) { return bc_f32_from_f16((u16)(v >> 16)); }
#endif
static __device__ __forceinline__ bc_pw bc_pw_absmax(bc_pw m, bc_pw v) {
  v &= 0x7FFF7FFFu;
#if BC_ARCH >= 80 && BC_DTYPE == 1 && BC_NAN_SCALE
  asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(m) : "r"(m), "r"(v));
#elif BC_ARCH >= 80 && BC_NAN_SCALE
  asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(m) : "r"(m), "r"(v));
#elif BC_ARCH >= 80 && BC_DTYPE == 1
  asm("max.bf16x2 %0, %1, %2;" : "=r"(m) : "r"(m), "r"(v));
#elif BC_ARCH >= 80
  asm("max.f16x2 %0, %1, %2;" : "=r"(m) : "r"(m), "r"(v));
#else
  // non-negative 16-bit floats order as their bits, NaN (above 0x7F80 / 0x7C00) excluded
  const u32 inf = BC_DTYPE == 1 ? 0x7F80u : 0x7C00u;
  u32 lo = v & 0xFFFFu, hi = v >> 16, mlo = m & 0xFFFFu, mhi = m >> 16;
  if (lo <= inf && lo > mlo) mlo = lo;
  if (hi <= inf && hi > mhi) mhi = hi;
  m = mlo | (mhi << 16);
#endif
  return m;
}
static __device__ __forceinline__ bc_pw bc_pw_absmax16(bc_pw m, uint4 u) {
  return bc_pw_absmax(bc_pw_absmax(bc_pw_absmax(bc_pw_absmax(m, u.x), u.y), u.z), u.w);
}
#endif
static __device__ __forceinline__ float bc_pw_max(bc_pw m) { return bc_bmax(bc_pw_lo(m), bc_pw_hi(m)); }

// Codes of elements j, j + 1 of a run (j even) into the packed words w (common.cuh: bc_code_pos):
// one pair conversion where there is a hardware one (8 bits, elements encoded through one), else
// each code on its own (the generic encode: its sign OR folds into the placement).
static __device__ __forceinline__ void bc_pack_pair(u32 *w, int j, float a, float b) {
#if BC_ELEM_HW_CVT || BC_ELEM_VIA
  bc_put_at(w, bc_pair_pos(j), bc_pair_order(bc_encode2(a, b)), 2 * BC_ELEM_BITS);
#else
  bc_put_at(w, bc_code_pos(j), bc_encode1(a), BC_ELEM_BITS);
  bc_put_at(w, bc_code_pos(j + 1), bc_encode1(b), BC_ELEM_BITS);
#endif
}

#if BC_QUAD
// Codes of elements j .. j + 3 of a run (j a multiple of 4), from x times bc_quad_factor(e); CLAMP
// false where the blocks' amax times factor is at most max (bc_encode4_scaled).
template <bool CLAMP>
static __device__ __forceinline__ void bc_pack_quad(u32 *w, int j, float a, float b, float c, float d) {
#if BC_QUAD_FOLD
  bc_put_at(w, bc_code_pos(j), bc_encode4_scaled<CLAMP>(a, b, c, d), 4 * BC_ELEM_BITS);
#else
  bc_put_at(w, bc_code_pos(j), bc_encode4(a, b, c, d), 4 * BC_ELEM_BITS);
#endif
}
static __device__ __forceinline__ float bc_quad_factor(float e) { return BC_QUAD_FOLD ? __fmul_rn(e, BC_ELEM_VIA_SCALE) : e; }
#endif

/* bf16 input, e8m0 factors (powers of two), elements encoded in bf16x2 arithmetic: a pair of
   inputs times its factor is one exact bf16x2 multiply, no fp32 round trip (common.cuh: bc_hmul2) */
#define BC_RAW2 (BC_ELEM_BF16X2 && BC_DTYPE == 1 && (BC_RULE == 1 || BC_RULE == 2))
/* other inputs and factors, 4-bit elements encoded in bf16x2 arithmetic: the fp32 products
   narrowed by round-to-odd (common.cuh: bc_bf16x2_rto), 8 codes a word (bc_pack8_spread) */
#define BC_RTO8 (BC_ELEM_BF16X2 && BC_ELEM_BITS == 4 && !BC_RAW2)
#if BC_RTO8
// Codes of elements j .. j + 7 (j a multiple of 8) from their fp32 values times the factor;
// elements k and k + 4 share a pair.
static __device__ __forceinline__ void bc_pack_rto8(u32 *w, int j, const float (&y)[8]) {
  w[j / 8] = bc_pack8_spread(bc_encode_bf16x2_m(bc_bf16x2_rto(y[0], y[4])), bc_encode_bf16x2_m(bc_bf16x2_rto(y[1], y[5])),
                             bc_encode_bf16x2_m(bc_bf16x2_rto(y[2], y[6])), bc_encode_bf16x2_m(bc_bf16x2_rto(y[3], y[7])));
}
#endif
#if BC_RAW2
// Codes of elements j, j + 1 (j even) from the bf16 pair x (element j in the low half) and the
// factor pair f (bc_bf16x2_pow2).
static __device__ __forceinline__ void bc_pack_raw2(u32 *w, int j, u32 x, u32 f) {
  bc_put_at(w, bc_pair_pos(j), bc_pair_order(bc_encode_bf16x2(bc_hmul2(x, f))), 2 * BC_ELEM_BITS);
}
// Codes of elements j .. j + 7 (j a multiple of 8) from four bf16 pairs x0 .. x3 (elements k and
// k + 4 in the low and high halves of x_k: the caller pairs them so) and the factor pair f: one
// word of 4-bit codes (common.cuh: bc_pack8_spread); other widths pair by pair (then x_k holds
// elements 2k, 2k + 1).
static __device__ __forceinline__ void bc_pack_raw8(u32 *w, int j, u32 x0, u32 x1, u32 x2, u32 x3, u32 f) {
#if BC_ELEM_BITS == 4
  w[j / 8] = bc_pack8_spread(bc_encode_bf16x2_m(bc_hmul2(x0, f)), bc_encode_bf16x2_m(bc_hmul2(x1, f)),
                             bc_encode_bf16x2_m(bc_hmul2(x2, f)), bc_encode_bf16x2_m(bc_hmul2(x3, f)));
#else
  bc_pack_raw2(w, j, x0, f);
  bc_pack_raw2(w, j + 2, x1, f);
  bc_pack_raw2(w, j + 4, x2, f);
  bc_pack_raw2(w, j + 6, x3, f);
#endif
}
// Pairs for bc_pack_raw8 from the four words of 8 consecutive bf16 elements (2k, 2k + 1 in w_k).
static __device__ __forceinline__ void bc_raw8_pairs(u32 w0, u32 w1, u32 w2, u32 w3, u32 (&x)[4]) {
#if BC_ELEM_BITS == 4
  x[0] = __byte_perm(w0, w2, 0x5410);  // elements 0, 4
  x[1] = __byte_perm(w0, w2, 0x7632);  // 1, 5
  x[2] = __byte_perm(w1, w3, 0x5410);  // 2, 6
  x[3] = __byte_perm(w1, w3, 0x7632);  // 3, 7
#else
  x[0] = w0, x[1] = w1, x[2] = w2, x[3] = w3;
#endif
}
#endif

#if BC_2D
// Lane bit o (a power of two) of a thread index whose units (UW elements each, UPR of them a tile
// row, rows one after another) lie in one 2D block for every lane: o moves the unit within the
// block's BC_BC / UW units of a row, or the row within its BC_BR rows. Loads: units are vectors,
// i = tid + k * BC_THREADS; the register path's runs: units are runs (BC_RPR a row).
template <int UPR, int UW>
static __device__ __forceinline__ constexpr bool bc_lane_bit_in_block(int o) {
  return (BC_BC >= UW && o < BC_BC / UW) || (o >= UPR && o < UPR * BC_BR);
}
// The lane whose in-block lane bits are all zero.
template <int UPR, int UW>
static __device__ __forceinline__ bool bc_block_leader(int tid) {
  int mask = 0;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1)
    if (bc_lane_bit_in_block<UPR, UW>(o)) mask |= o;
  return (tid & mask) == 0;
}
// Block amax m of this lane's part into bmax[slot]: pooled across the lanes of its block by
// shuffles, then one shared atomic per block and warp.
template <int UPR, int UW>
static __device__ __forceinline__ void bc_pool_bmax(float *bmax, int slot, float m, int tid) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1)
    if (bc_lane_bit_in_block<UPR, UW>(o)) m = bc_bmax(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  if ((BC_NAN_SCALE ? !(m <= 0.0f) : m > 0.0f) && bc_block_leader<UPR, UW>(tid))  // a NaN too under BC_NAN_SCALE
    atomicMax((unsigned int *)&bmax[slot], __float_as_uint(m));
}
#endif

// One-byte scale entries (r, c .. c + N - 1) of layout sl, c a multiple of N (N = 2 or 4): one
// N-byte store where they are adjacent bytes (row-major compact; the 128x4 swizzle, whose entries
// c, c + 1 share a word when c is even in the atom) at an N-byte aligned address, else entry by
// entry. A warp's one-byte stores of a run's blocks were one L2 request a block and row (NVFP4's
// 1x16 blocks, two a 32-element run: tests/bench/NOTES.md, "the both kernels' ceiling").
template <int N>
static __device__ __forceinline__ void bc_write_scales_n(void *scale, const bc_sl &sl, i64 r, i64 c, const u32 (&stored)[N]) {
  static_assert(N == 2 || N == 4, "two or four entries");
  const i64 off = bc_sl_offset(sl, r, c);
  u8 *p = (u8 *)scale + off;
  if ((sl.order == 0 || sl.order == 2) && c + N <= sl.lcols && ((off | (i64)(unsigned long long)p) & (N - 1)) == 0) {
    u32 w = 0u;
#pragma unroll
    for (int b = 0; b < N; b++) w |= (stored[b] & 0xFFu) << (8 * b);
    if (N == 2) *(u16 *)p = (u16)w;
    else *(u32 *)p = w;
    return;
  }
#pragma unroll
  for (int b = 0; b < N; b++)
    if (c + b < sl.lcols) ((u8 *)scale)[bc_sl_offset(sl, r, c + b)] = (u8)stored[b];
}

// Columnwise-only kernels of 6 blocks an SM (40 registers) keep the per-thread forms of the
// tile's load addresses, tile index and two-level factors: ptxas spilled or stalled their
// replacements there (load addresses: nvfp4 / mxfp4 / mxfp8 columnwise 1.5-4.6 points slower on an
// H200; the tile index by multiplier and the factor table: mxfp4 88.3 -> 80.2%, nvfp4 68.3 -> 62.8%
// of the copy on an H100, tests/bench/NOTES.md). Measured, not derived: a tuning entry that moves
// these kernels off 6 blocks an SM moves them off this rule too.
#define BC_LEAN (!BC_ROWWISE && BC_MIN_BLOCKS >= 6)

// This thread's BC_NLOAD input vectors of tile (r0, c0), all loads issued before any use. Vector
// i = tid + k * BC_THREADS is at tile row i / BC_VPR, vector column i % BC_VPR; where BC_VPR
// divides BC_THREADS a thread's vectors share their column and lie BC_THREADS / BC_VPR rows apart:
// one address, then a constant stride (measured: the per-vector division and 64-bit multiply were
// ~4 of 20 instructions an element of NVFP4's rowwise kernel, tests/bench/NOTES.md).
// Not in the lean kernels (BC_LEAN).
#define BC_ADDR_STRIDE (BC_THREADS % BC_VPR == 0 && !BC_LEAN)
template <int MODE>
static __device__ __forceinline__ void bc_block_load(const BC_DTYPE_T *__restrict__ in, i64 rows, i64 cols, i64 ld, i64 r0,
                                                     i64 c0, int tid, uint4 (&v)[BC_NLOAD]) {
#if BC_ADDR_STRIDE
  constexpr int RSTEP = BC_THREADS / BC_VPR;
  const unsigned ut = (unsigned)tid;
  const i64 r = r0 + (i64)(ut / BC_VPR), c = c0 + (i64)((ut % BC_VPR) * BC_VE);
  if (MODE == BC_LOAD_VEC) {
    const BC_DTYPE_T *p = in + r * ld + c;
    const i64 step = (i64)RSTEP * ld;
#pragma unroll
    for (int k = 0; k < BC_NLOAD; k++) {
      v[k] = *(const uint4 *)p;
      p += step;
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < BC_NLOAD; k++) v[k] = bc_load_vec<MODE>(in, rows, cols, ld, r + k * RSTEP, c);
#else
#pragma unroll
  for (int k = 0; k < BC_NLOAD; k++) {
    const int i = tid + k * BC_THREADS;
    v[k] = bc_load_vec<MODE>(in, rows, cols, ld, r0 + i / BC_VPR, c0 + (i % BC_VPR) * BC_VE);
  }
#endif
}

// The two-level rule (BC_RULE 3) with a scale element of at most 8 bits: a block's encode factor
// is a function of its scale code within a tensor (common.cuh: bc_two_level_enc), so one warp a
// tile computes S_enc / elem_max, S_dec and the factor of every code into shared memory (tl: the
// 2^BITS factors, then those two), and a block looks its factor up instead of decoding its scale
// and dividing (~10 instructions a block of 16 elements: tests/bench/NOTES.md). Each thread had
// also computed the tensor's factors (a division and a double reciprocal) for every tile.
#define BC_TL_TAB (BC_RULE == 3 && BC_SELEM_BITS <= 8 && !BC_LEAN)
#if BC_TL_TAB
#define BC_TL_N (1 << BC_SELEM_BITS)
static __device__ __forceinline__ void bc_tl_fill(float *tl, const float *global_amax, int lane) {
  const bc_tensor_scale ts = bc_tensor_scale_from_amax(global_amax);
#pragma unroll
  for (int i = lane; i < BC_TL_N; i += 32) tl[i] = bc_two_level_enc((u32)i, ts.dec);
  if (lane == 0) tl[BC_TL_N] = ts.enc_per_elem, tl[BC_TL_N + 1] = ts.dec;
}
#endif
static __device__ __forceinline__ bc_bscale bc_block_scale_q(float amax, const bc_tensor_scale &ts, const float *tl) {
#if BC_TL_TAB
  bc_bscale s;
  s.stored = bc_two_level_code(amax, ts.enc_per_elem);
  s.enc = tl[s.stored];
  return s;
#else
  (void)tl;
  return bc_block_scale(amax, ts);
#endif
}

// Element (tr, tc) of the staged tile as fp32 (the stochastic-rounding paths, rolled loops).
static __device__ __forceinline__ float bc_staged(const u8 *tile, int tr, int tc) {
  const BC_DTYPE_T *p = (const BC_DTYPE_T *)(tile + tr * BC_TS) + tc;
#if BC_DTYPE == 0
  return *p;
#elif BC_DTYPE == 1
  return bc_f32_from_bf16(*p);
#else
  return bc_f32_from_f16(*p);
#endif
}

static __device__ __forceinline__ u32 bc_encode_one(float v, int sr, bc_rng &rng, u64 e) {
#if BC_SR_ALLOWED
  if (sr) return bc_encode_sr_t<bc_elem>(v, rng.bits(e));
#endif
  return bc_encode1(v);
}

// Store n = RUN * bits / 8 bytes of codes at dst (whole 16-byte pieces): 16-byte stores when
// `vec`, else the first `valid` bytes one by one.
template <int N>
static __device__ __forceinline__ void bc_store_codes(u8 *dst, const u32 *w, bool vec, int valid) {
  static_assert(N % 16 == 0, "runs of other lengths are staged (BC_ROW_STAGED)");
  if (vec) {
#pragma unroll
    for (int i = 0; i < N / 16; i++) bc_store16(dst + 16 * i, make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]));
  } else if (valid == N) {
#pragma unroll
    for (int i = 0; i < N; i++) dst[i] = (u8)(w[i >> 2] >> (8 * (i & 3)));
  } else {
#pragma unroll
    for (int i = 0; i < N; i++)
      if (i < valid) dst[i] = (u8)(w[i >> 2] >> (8 * (i & 3)));
  }
}

// Output rows staged in shared memory (row j at st + j * stride, at least NB + 16 bytes) to global
// memory, all threads cooperating, 16-byte pieces with consecutive threads along a row.
// dst_len(j, &dst, &len) names row j's destination and its valid byte count (len <= 0: nothing).
// Staging (bc_stage_words), by MODE:
//   BC_ROWS_ALIGNED  dst 16-byte aligned; the row's bytes staged from offset 0
//   BC_ROWS_STAGED   dst of any alignment m = dst & 15; the bytes staged from offset m (shifted as
//                    they were staged), so each aligned destination piece is one staged piece
//   BC_ROWS_SHIFT    dst of any alignment; the bytes staged from offset 0, and the aligned
//                    destination piece q (16 bytes at dst - m + 16 q) shifted out of the staged
//                    bytes [16 q - m, 16 q - m + 16) as it is written (five staged words, funnel
//                    shifts): cheap staging, no partial stores into shared memory
// Of a row that is not aligned only the first and last piece are written in parts (bc_store_part).
// LAST (the kernel's last phase): those pieces are items of their own after every row's inner ones,
// so that few warps run both paths. Not before a barrier: the warps left with them hold it (a
// kernel's columnwise part after its rowwise write ran slower; tests/bench/NOTES.md, "Ragged
// shapes: the stores, not the loads").
enum { BC_ROWS_ALIGNED = 0, BC_ROWS_STAGED = 1, BC_ROWS_SHIFT = 2 };
template <int NB, int MODE, bool LAST, class F>
static __device__ __forceinline__ void bc_write_rows(const u8 *st, int stride, int nrows, F dst_len) {
  constexpr int nch = NB / 16 + (MODE != BC_ROWS_ALIGNED ? 1 : 0);
  constexpr int nin = MODE != BC_ROWS_ALIGNED && LAST ? nch - 2 : nch;  // pieces in row order
#pragma unroll 1
  for (int i = threadIdx.x; i < nrows * nch; i += BC_THREADS) {
    int j, q;
    if (i < nrows * nin) {
      j = i / nin;
      q = i % nin + (nin < nch ? 1 : 0);
    } else {  // LAST: the first and last pieces
      j = (i - nrows * nin) >> 1;
      q = (i - nrows * nin) & 1 ? nch - 1 : 0;
    }
    u8 *dst;
    i64 len;
    dst_len(j, dst, len);
    const int m = MODE != BC_ROWS_ALIGNED ? (int)((unsigned long long)dst & 15u) : 0;
    const i64 o = 16 * q - m;  // destination offset of this piece
    if (o >= len) continue;
    const u8 *row = st + j * stride;
    uint4 d;
    if (MODE == BC_ROWS_SHIFT && m) {
      const int so = 16 * q - m, w0 = so >> 2;  // first staged byte (< 0: the bytes before the row, not stored)
      const u32 sh = 8u * (u32)(so & 3);
      u32 x[5];
#pragma unroll
      for (int k = 0; k < 5; k++) x[k] = w0 + k >= 0 ? ((const u32 *)row)[w0 + k] : 0u;
      d = make_uint4(__funnelshift_r(x[0], x[1], sh), __funnelshift_r(x[1], x[2], sh), __funnelshift_r(x[2], x[3], sh),
                     __funnelshift_r(x[3], x[4], sh));
    } else {
      d = *(const uint4 *)(row + 16 * q);
    }
    if (o >= 0 && o + 16 <= len) bc_store16(dst + o, d);
    else bc_store_part(dst + o, d, o < 0 ? (int)-o : 0, o + 16 <= len ? 16 : (int)(len - o));
  }
}

// bc_write_rows for a whole tile whose NR output rows are all NB bytes long and 16-byte aligned
// (BC_ROWS_ALIGNED, every row valid), `ld` bytes apart from row 0's destination (dst_len(0, ...)):
// the same pieces in the same order (consecutive threads along a row), but each piece's row and
// column from the thread index by constants and no bounds: the general loop's per-piece row
// lookup, 64-bit lengths and bounds were ~40 instructions a 16-byte piece (MXFP6 rowcol on an
// H200: 2.3 of 25.1 instructions an element in each direction's write; tests/bench/NOTES.md).
template <int NB, int NR, class F>
static __device__ __forceinline__ void bc_write_rows_whole(const u8 *st, int stride, F dst_len, i64 ld) {
  constexpr int P = NB / 16, N = NR * P;
  static_assert(NB % 16 == 0, "whole 16-byte pieces");
  u8 *dst0;
  i64 len0;
  dst_len(0, dst0, len0);
#pragma unroll
  for (int k = 0; k < (N + BC_THREADS - 1) / BC_THREADS; k++) {
    const unsigned i = threadIdx.x + (unsigned)(k * BC_THREADS);
    if (N % BC_THREADS == 0 || i < (unsigned)N) {
      const unsigned j = i / P, q = i % P;
      bc_store16(dst0 + (i64)j * ld + 16 * q, *(const uint4 *)(st + j * stride + 16 * q));
    }
  }
}

// The transposed columnwise rows of a tile, staged at `codes` (BC_TC rows, BC_OB bytes each,
// BC_CSTRIDE apart; out_row: bc_write_rows' dst_len), destination rows col_ld bytes apart: whole
// tiles of aligned rows without bounds, other aligned rows piece by piece, unaligned rows from
// their shifted staging (BC_ROWS_STAGED).
template <class F>
static __device__ __forceinline__ void bc_write_col_rows(const u8 *codes, bool whole, int vec_col, F out_row, i64 col_ld) {
  if (vec_col && whole) bc_write_rows_whole<BC_OB, BC_TC>(codes, BC_CSTRIDE, out_row, col_ld);
  else if (vec_col) bc_write_rows<BC_OB, BC_ROWS_ALIGNED, false>(codes, BC_CSTRIDE, BC_TC, out_row);
  else bc_write_rows<BC_OB, BC_ROWS_STAGED, false>(codes, BC_CSTRIDE, BC_TC, out_row);
}

// Stage the code words w[0 .. N) of an output row at byte offset `at` of its staging row `st`
// (16-byte aligned): word stores unless `shifted` (BC_ROWS_STAGED: from the destination's
// alignment dst & 15), when the bytes are moved to their place in the 16-byte pieces of the staging
// row by funnel shifts, pieces wholly this thread's are one 16-byte store, the two it shares with
// its neighbours' bytes are written in parts (bc_store_part).
template <int N>
static __device__ __forceinline__ void bc_stage_words(u8 *st, int at, const u32 *w, bool shifted, const u8 *dst) {
  if (!shifted) {
#pragma unroll
    for (int i = 0; i < N; i++) ((u32 *)(st + at))[i] = w[i];
    return;
  }
  const int pos = (int)((unsigned long long)dst & 15u) + at;
  u8 *frame = st + (pos & ~15);
  const int s = pos & 15, W = s >> 2, sh = 8 * (s & 3);
  constexpr int P = (15 + 4 * N) / 16 + 1;  // pieces the bytes can touch
  // B[j]: word j - W of w (zero outside); frame word j = funnel(B[j - 1], B[j]) by the byte shift
  u32 prev = 0u;
#pragma unroll
  for (int q = 0; q < P; q++) {
    u32 f[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int j = 4 * q + k;
      const u32 b0 = j < N ? w[j < N ? j : 0] : 0u, b1 = j - 1 >= 0 && j - 1 < N ? w[j - 1 >= 0 && j - 1 < N ? j - 1 : 0] : 0u;
      const u32 b2 = j - 2 >= 0 && j - 2 < N ? w[j - 2 >= 0 && j - 2 < N ? j - 2 : 0] : 0u;
      const u32 b3 = j - 3 >= 0 && j - 3 < N ? w[j - 3 >= 0 && j - 3 < N ? j - 3 : 0] : 0u;
      const u32 b = W & 2 ? (W & 1 ? b3 : b2) : (W & 1 ? b1 : b0);
      f[k] = __funnelshift_l(prev, b, sh);
      prev = b;
    }
    const int lo = s - 16 * q > 0 ? s - 16 * q : 0, hi = s + 4 * N - 16 * q < 16 ? s + 4 * N - 16 * q : 16;
    const uint4 v = make_uint4(f[0], f[1], f[2], f[3]);
    if (lo == 0 && hi == 16) *(uint4 *)(frame + 16 * q) = v;
    else if (lo < hi) bc_store_part(frame + 16 * q, v, lo, hi);
  }
}

#if BC_CSCALES
#if BC_SCALE_BYTES == 4
typedef u32 bc_csc_t;  // a staged scale entry
#else
typedef u8 bc_csc_t;
#endif
static __device__ __forceinline__ void bc_csc_put(u8 *csc, int i, u32 stored) { ((bc_csc_t *)csc)[i] = (bc_csc_t)stored; }
// The staged columnwise scales of tile (r0, c0), entry j * BC_CSB + q = (tile column j, block row
// q), to (view row c0 + j, view column r0 / BC_CBR + q) of the layout, where they lie in it (view
// rows < cols, view columns < lcols): consecutive threads take consecutive block rows of a column
// (compact row-major and swizzled layouts: adjacent bytes), or consecutive columns where the
// layout is column-major (order 1).
// A whole tile's entries in a compact row-major layout (order 0) are BC_CSB consecutive entries of
// each of its BC_TC view rows, starting at a multiple of BC_CSB: where those are whole aligned
// words, one word store each from the staged words (the general loop below spends ~45
// instructions an entry on its layout switch and 64-bit bounds: 1.5 of MXFP6 rowcol's 25.1
// instructions an element on an H200, tests/bench/NOTES.md).
#define BC_CSC_WORDS (BC_CSB * BC_SCALE_BYTES % 4 == 0)
static __device__ __forceinline__ void bc_csc_write(const u8 *csc, void *col_scale, const bc_sl &col_sl, i64 r0, i64 c0, i64 cols,
                                                    int tid, bool whole) {
#if BC_CSC_WORDS
  constexpr int NW = BC_CSB * BC_SCALE_BYTES / 4;  // words of a tile column
  if (whole && col_sl.order == 0 && (((unsigned long long)col_scale | (unsigned long long)(col_sl.ld * BC_SCALE_BYTES)) & 3u) == 0) {
    u8 *base = (u8 *)col_scale + bc_sl_offset(col_sl, c0, r0 / BC_CBR) * BC_SCALE_BYTES;
#pragma unroll
    for (int k = 0; k < (BC_TC * NW + BC_THREADS - 1) / BC_THREADS; k++) {
      const unsigned i = (unsigned)tid + (unsigned)(k * BC_THREADS);
      if ((BC_TC * NW) % BC_THREADS == 0 || i < (unsigned)(BC_TC * NW)) {
        const unsigned j = i / NW, w = i % NW;
        *(u32 *)(base + (i64)j * col_sl.ld * BC_SCALE_BYTES + 4 * w) = ((const u32 *)csc)[i];
      }
    }
    return;
  }
#endif
  const bool down = col_sl.order == 1;
#pragma unroll
  for (int i = tid; i < BC_TC * BC_CSB; i += BC_THREADS) {
    const int j = down ? i % BC_TC : i / BC_CSB, q = down ? i / BC_TC : i % BC_CSB;
    const i64 c = c0 + j, sc = r0 / BC_CBR + q;
    if (c < cols && sc < col_sl.lcols) bc_write_scale(col_scale, col_sl, c, sc, ((const bc_csc_t *)csc)[j * BC_CSB + q]);
  }
}
#endif

extern "C" __global__ void __launch_bounds__(BC_THREADS, BC_MIN_BLOCKS)
${KERNEL}(const BC_DTYPE_T *__restrict__ in, i64 rows, i64 cols, i64 ld, const float *__restrict__ global_amax,
          u8 *__restrict__ row_data, void *__restrict__ row_scale, bc_sl row_sl,
          u8 *__restrict__ col_data, void *__restrict__ col_scale, bc_sl col_sl, i64 col_ld,
          u64 sr_seed, u64 sr_offset, int sr, int vec_in, int vec_row, int vec_col, i64 tiles_x, i64 tiles, u32 tx_m, u32 tx_s) {
  extern __shared__ __align__(16) u8 bc_smem[];
  u8 *tile = bc_smem;
  const int tid = threadIdx.x;
  const i64 t = BC_BID.x;

  if (t >= tiles) {  // scale padding, written as zeros
    const i64 stride = ((i64)BC_GDIM.x - tiles) * BC_THREADS;
    const i64 i0 = (t - tiles) * BC_THREADS + tid;
#if BC_ROWWISE
    for (i64 i = i0, n = bc_sl_pad_count(row_sl); i < n; i += stride) bc_sl_pad_zero(row_sl, row_scale, BC_SCALE_BYTES, i);
#endif
#if BC_COLUMNWISE
    for (i64 i = i0, n = bc_sl_pad_count(col_sl); i < n; i += stride) bc_sl_pad_zero(col_sl, col_scale, BC_SCALE_BYTES, i);
#endif
    return;
  }

#if BC_LEAN
  const i64 r0 = (t / tiles_x) * BC_TR, c0 = (t % tiles_x) * BC_TC;
  (void)tx_m, (void)tx_s;
#else
  // the tile's row t / tiles_x by the host's multiplier (t < 2^31: bc_ops.c refuses more tiles)
  const u32 ty = bc_udiv31((u32)t, tx_m, tx_s);
  const i64 r0 = (i64)ty * BC_TR, c0 = (i64)((u32)t - ty * (u32)tiles_x) * BC_TC;
#endif
  const bool whole = r0 + BC_TR <= rows && c0 + BC_TC <= cols;
#if BC_TL_TAB
  // the two-level rule's factors of this tensor (bc_tl_fill): the last warp computes them while its
  // loads are in flight, every thread reads them after the load's barrier
  __shared__ __align__(8) float tl_tab[BC_TL_N + 2];
#define BC_TS_COMPUTE() \
  if (tid >= BC_THREADS - 32) bc_tl_fill(tl_tab, global_amax, tid & 31)
#else
  const bc_tensor_scale ts = bc_tensor_scale_from_amax(global_amax);  // constants but for a two-level rule
#define BC_TS_COMPUTE() (void)0
#endif
#if BC_ROWWISE
  u8 *rcodes = bc_smem + BC_RCODES_OFF;
#endif
#if BC_2D
  float *bmax = (float *)(bc_smem + BC_TR * BC_TS);
  for (int i = tid; i < (BC_TR / BC_BR) * BC_BMAX_COLS; i += BC_THREADS) bmax[i] = 0.0f;
  __syncthreads();
#endif

  // ---- load: all loads issued before the first shared-memory store (BC_ROWREG: into the
  // registers the rowwise part encodes from)
#if BC_ROWREG
  uint4 rv[BC_NLOAD];
  {
#pragma unroll
    for (int j = 0; j < BC_NTJ; j++) {
      const int task = tid + j * BC_THREADS;
      const i64 r = r0 + task / BC_RPR, c = c0 + (task % BC_RPR) * BC_RUN_R;
#pragma unroll
      for (int k = 0; k < BC_NV_R; k++) {
        uint4 &d = rv[j * BC_NV_R + k];
        if (whole && vec_in) d = bc_load_vec<BC_LOAD_VEC>(in, rows, cols, ld, r, c + k * BC_VE);
        else if (whole) d = bc_load_vec<BC_LOAD_ELEMS>(in, rows, cols, ld, r, c + k * BC_VE);
        else d = bc_load_vec<BC_LOAD_MASKED>(in, rows, cols, ld, r, c + k * BC_VE);
      }
    }
    BC_TS_COMPUTE();
    // the run's 2D blocks: BC_NBLK_R of them (or one shared by BC_LANES_R runs); a tile no taller
    // than a block holds one block row, so this thread's runs pool before the shuffles
    constexpr int nvb = BC_NV_R / BC_NBLK_R;
    float acc[BC_NBLK_R];
#pragma unroll
    for (int j = 0; j < BC_NTJ; j++) {
      const int task = tid + j * BC_THREADS, tr = task / BC_RPR, tc0 = (task % BC_RPR) * BC_RUN_R;
#pragma unroll
      for (int b = 0; b < BC_NBLK_R; b++) {
        bc_pw mm = bc_pw_zero();
#pragma unroll
        for (int k = 0; k < nvb; k++) mm = bc_pw_absmax16(mm, rv[j * BC_NV_R + b * nvb + k]);
        const float m = bc_pw_max(mm);
        acc[b] = BC_TR <= BC_BR && j ? bc_bmax(acc[b], m) : m;
        if (BC_TR > BC_BR || j == BC_NTJ - 1)
          bc_pool_bmax<BC_RPR, BC_RUN_R>(bmax, (tr / BC_BR) * BC_BMAX_COLS + (tc0 + b * BC_BC) / BC_BC, acc[b], tid);
      }
    }
    __syncthreads();
  }
#else
  {
    uint4 v[BC_NLOAD];
    if (whole && vec_in) bc_block_load<BC_LOAD_VEC>(in, rows, cols, ld, r0, c0, tid, v);
    else if (whole) bc_block_load<BC_LOAD_ELEMS>(in, rows, cols, ld, r0, c0, tid, v);  // rows not 16-byte aligned
    else bc_block_load<BC_LOAD_MASKED>(in, rows, cols, ld, r0, c0, tid, v);
    BC_TS_COMPUTE();
#pragma unroll
    for (int k = 0; k < BC_NLOAD; k++) {
#if BC_ADDR_STRIDE
      const unsigned i = (unsigned)tid + k * BC_THREADS;  // unsigned: a division by BC_VPR is a shift
#else
      const int i = tid + k * BC_THREADS;
#endif
      const int tr = i / BC_VPR, vcol = i % BC_VPR;
      *(uint4 *)(tile + tr * BC_TS + vcol * 16) = v[k];
#if BC_2D
      // lanes whose vectors lie in one 2D block pool their maxima first
      bc_pool_bmax<BC_VPR, BC_VE>(bmax, (tr / BC_BR) * BC_BMAX_COLS + (vcol * BC_VE) / BC_BC,
                                  bc_pw_max(bc_pw_absmax16(bc_pw_zero(), v[k])), tid);
#endif
    }
    __syncthreads();
  }
#endif

#if BC_TL_TAB
  const float *tl = tl_tab;
  bc_tensor_scale ts;
  ts.enc_per_elem = tl_tab[BC_TL_N], ts.dec = tl_tab[BC_TL_N + 1];
#else
  const float *tl = nullptr;
#endif
  (void)tl;
#undef BC_TS_COMPUTE

  bc_rng rng;
  rng.init(sr_seed, sr_offset);
  (void)rng;

#if BC_ROWWISE || BC_COLREG
  // ---- rowwise: runs of BC_RUN_R elements along a tile row; a block of BC_LANES_R runs is
  // reduced across that many adjacent lanes (every lane takes part in the shuffles)
  {
    const i64 row_bytes = cols * BC_ELEM_BITS / 8;
    constexpr int ntask = BC_TR * BC_RPR;
    // the register path indexes rv by the trip: unrolled
#if BC_ROWREG
#pragma unroll
#else
#pragma unroll 1
#endif
    for (int task0 = 0; task0 < ntask; task0 += BC_THREADS) {
      // past the last task: a valid index for the reads; the lanes of a block are all in or all out
      // (unsigned: divisions by powers of two are shifts)
      const unsigned ut = (unsigned)(task0 + tid), task = ut < (unsigned)ntask ? ut : ut % (unsigned)ntask;
      const int tr = (int)(task / BC_RPR), tc0 = (int)(task % BC_RPR) * BC_RUN_R;
      const i64 r = r0 + tr, c = c0 + tc0;
      const bool live = task0 + tid < ntask && r < rows && c < cols;
      uint4 v[BC_NV_R];
#pragma unroll
      for (int k = 0; k < BC_NV_R; k++)
#if BC_ROWREG
        v[k] = rv[(task0 / BC_THREADS) * BC_NV_R + k];
#else
        v[k] = *(const uint4 *)(tile + tr * BC_TS + tc0 * BC_S + 16 * k);
#endif
      float enc[BC_NBLK_R];
      bool nosat = true;  // every block of the run: amax x factor <= max (no element saturates)
#if BC_ROW_SCALES_N
      u32 rstored[BC_NBLK_R];  // the run's one-byte rowwise scales, written together below
      i64 rsc0 = 0;
#endif
#pragma unroll
      for (int b = 0; b < BC_NBLK_R; b++) {
        float m;
#if BC_2D
        m = bmax[(tr / BC_BR) * BC_BMAX_COLS + (tc0 + b * BC_BC) / BC_BC];
#else
        constexpr int nvb = BC_NV_R / BC_NBLK_R;  // vectors of one block in the run
        bc_pw mm = bc_pw_zero();
#pragma unroll
        for (int k = 0; k < nvb; k++) mm = bc_pw_absmax16(mm, v[b * nvb + k]);
        m = bc_pw_max(mm);
#pragma unroll
        for (int o = 1; o < BC_LANES_R; o <<= 1) m = bc_bmax(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
#endif
        const bc_bscale s = bc_block_scale_q(m, ts, tl);
        enc[b] = s.enc;
        nosat = nosat && __fmul_rn(m, s.enc) <= BC_ELEM_MAX_FINITE;
        // (c0 is a multiple of BC_TC: where that is a multiple of BC_BC, the block index is c0's plus a shift)
        const i64 sc = BC_TC % BC_BC == 0 ? c0 / BC_BC + (i64)((unsigned)(tc0 + b * BC_BC) / BC_BC) : (c + b * BC_BC) / BC_BC;
#if BC_ROW_SCALES_N
        rstored[b] = s.stored;
        if (b == 0) rsc0 = sc;
#else
        if (BC_ROWWISE && live && (tc0 / BC_RUN_R) % BC_LANES_R == 0 && sc < row_sl.lcols &&
            (!BC_2D || row_sl.per_row || tr % BC_BR == 0))
          bc_write_scale(row_scale, row_sl, row_sl.per_row ? r : r / BC_BR, sc, s.stored);
#endif
#if BC_COLREG
        // the block's columnwise scale (view [cols, rows]: view row c / BC_BC, or each column where
        // the layout has one per row; view column r / BC_CBR), from its first row's runs
        const i64 cb = c + (BC_NBLK_R == 1 ? 0 : b * BC_BC);  // the block's first column in this run
        if (live && tr % BC_BR == 0 && cb < cols && r / BC_CBR < col_sl.lcols) {
          if (col_sl.per_row) {
#pragma unroll 1
            for (int q = 0; q < (BC_NBLK_R == 1 ? BC_RUN_R : BC_BC) && cb + q < cols; q++)
              bc_write_scale(col_scale, col_sl, cb + q, r / BC_CBR, s.stored);
          } else if ((tc0 / BC_RUN_R) % BC_LANES_R == 0) {
            bc_write_scale(col_scale, col_sl, cb / BC_BC, r / BC_CBR, s.stored);
          }
        }
#endif
      }
#if BC_ROW_SCALES_N
      if (BC_ROWWISE && live) bc_write_scales_n<BC_NBLK_R>(row_scale, row_sl, r, rsc0, rstored);  // 1D: scale row r
#endif
      if (!live) continue;
      // encode and store BC_RUN_BYTES output bytes
      u32 w[BC_RUN_BYTES / 4];
#pragma unroll
      for (int k = 0; k < BC_RUN_BYTES / 4; k++) w[k] = 0u;
#if BC_SR_ALLOWED
      if (sr) {
        // one run of whole words (BC_PACK_WE codes in BC_PACK_WG words) at a time, element by
        // element (rolled: Philox is large)
#pragma unroll
        for (int g = 0; g < BC_RUN_BYTES / 4 / BC_PACK_WG; g++) {
          const float e = enc[BC_NBLK_R == 1 ? 0 : (g * BC_PACK_WE) / BC_BC];
          u32 acc[BC_PACK_WG];
#pragma unroll
          for (int i = 0; i < BC_PACK_WG; i++) acc[i] = 0u;
#pragma unroll 1
          for (int j = 0; j < BC_PACK_WE; j++) {
            const int jj = g * BC_PACK_WE + j;
            const float y = __fmul_rn(bc_staged(tile, tr, tc0 + jj), e);
            bc_put_bits<BC_PACK_WG, BC_ELEM_BITS>(acc, bc_code_pos(j), bc_encode_one(y, 1, rng, (u64)(r * cols + c + jj)));
          }
#pragma unroll
          for (int i = 0; i < BC_PACK_WG; i++) w[g * BC_PACK_WG + i] = acc[i];
        }
      } else
#endif
      {
#if BC_RTO8
        // 8 elements (one or two input vectors, one block: blocks are 8k elements long) a word
        static_assert(BC_BC % 8 == 0 && 8 % BC_VE == 0 && BC_NV_R % (8 / BC_VE) == 0, "8 elements of one block per word");
#pragma unroll
        for (int k = 0; k < BC_NV_R; k += 8 / BC_VE) {
          const int j = k * BC_VE;
          const float e = enc[BC_NBLK_R == 1 ? 0 : j / BC_BC];
          float y[8];
#pragma unroll
          for (int h = 0; h < 8 / BC_VE; h++) bc_unpack16(v[k + h], y + h * BC_VE);
#pragma unroll
          for (int q = 0; q < 8; q++) y[q] = __fmul_rn(y[q], e);
          bc_pack_rto8(w, j, y);
        }
#else
#pragma unroll
        for (int k = 0; k < BC_NV_R; k++) {
          const int j = k * BC_VE;
          const float e = enc[BC_NBLK_R == 1 ? 0 : j / BC_BC];
#if BC_RAW2
          u32 x[4];
          bc_raw8_pairs(v[k].x, v[k].y, v[k].z, v[k].w, x);
          bc_pack_raw8(w, j, x[0], x[1], x[2], x[3], bc_bf16x2_pow2(e));
#else
          float f[BC_VE];
          bc_unpack16(v[k], f);
#if BC_QUAD
          const float eq = bc_quad_factor(e);
          if (BC_QUAD_FOLD && nosat) {
#pragma unroll
            for (int q = 0; q < BC_VE; q += 4)
              bc_pack_quad<false>(w, j + q, __fmul_rn(f[q], eq), __fmul_rn(f[q + 1], eq), __fmul_rn(f[q + 2], eq),
                                  __fmul_rn(f[q + 3], eq));
          } else {
#pragma unroll
            for (int q = 0; q < BC_VE; q += 4)
              bc_pack_quad<true>(w, j + q, __fmul_rn(f[q], eq), __fmul_rn(f[q + 1], eq), __fmul_rn(f[q + 2], eq),
                                 __fmul_rn(f[q + 3], eq));
          }
#else
#pragma unroll
          for (int q = 0; q < BC_VE; q += 2) bc_pack_pair(w, j + q, __fmul_rn(f[q], e), __fmul_rn(f[q + 1], e));
#endif
#endif
        }
#endif
      }
#if BC_COLREG
      // the codes transposed: code (tr, tc0 + i) to byte tr of staged output row tc0 + i, shifted
      // by its destination's alignment where those rows are not 16-byte aligned (BC_ROWS_STAGED)
#pragma unroll
      for (int i = 0; i < BC_RUN_R; i++) {
        const int m = vec_col ? 0 : (int)((unsigned long long)(col_data + (c0 + tc0 + i) * col_ld + r0) & 15u);
        bc_smem[(tc0 + i) * BC_CSTRIDE + m + tr] = (u8)(w[i >> 2] >> (8 * (i & 3)));
      }
#endif
#if BC_ROWWISE
#if !BC_ROW_STAGED
      const i64 left = (cols - c) * BC_ELEM_BITS / 8;
      if (vec_row) {
        bc_store_codes<BC_RUN_BYTES>(row_data + r * row_bytes + c * BC_ELEM_BITS / 8, w, left >= BC_RUN_BYTES,
                                     left < BC_RUN_BYTES ? (int)left : BC_RUN_BYTES);
      } else
#endif
      {
        // rows not 16-byte aligned, or BC_ROW_STAGED: staged, then written by bc_write_rows below
        bc_stage_words<BC_RUN_BYTES / 4>(rcodes + tr * BC_RSTRIDE, tc0 * BC_ELEM_BITS / 8, w, false, nullptr);
      }
#endif
    }
#if BC_ROWWISE
    if (BC_ROW_STAGED || !vec_row) {
      __syncthreads();
      auto out_row = [&](int j, u8 *&dst, i64 &len) {
        dst = row_data + (r0 + j) * row_bytes + c0 * BC_ELEM_BITS / 8;
        len = r0 + j < rows ? (cols - c0) * BC_ELEM_BITS / 8 : 0;
        if (len > BC_TC * BC_ELEM_BITS / 8) len = BC_TC * BC_ELEM_BITS / 8;
      };
      // BC_ROW_STAGED runs of 16-byte aligned rows (vec_row): plain pieces, no shifts
      if (BC_ROW_STAGED && vec_row && whole)
        bc_write_rows_whole<BC_TC * BC_ELEM_BITS / 8, BC_TR>(rcodes, BC_RSTRIDE, out_row, row_bytes);
      else if (BC_ROW_STAGED && vec_row) bc_write_rows<BC_TC * BC_ELEM_BITS / 8, BC_ROWS_ALIGNED, false>(rcodes, BC_RSTRIDE, BC_TR, out_row);
      else bc_write_rows<BC_TC * BC_ELEM_BITS / 8, BC_ROWS_SHIFT, !BC_COLUMNWISE>(rcodes, BC_RSTRIDE, BC_TR, out_row);
    }
#endif
  }
#endif

#if BC_COLREG
  // ---- columnwise (BC_COLREG): the transposed codes staged by the rowwise part, written out
  __syncthreads();
  {
    const i64 out_row_bytes = rows * BC_ELEM_BITS / 8;
    auto out_row = [&](int j, u8 *&dst, i64 &len) {
      dst = col_data + (c0 + j) * col_ld + r0 * BC_ELEM_BITS / 8;
      len = c0 + j < cols ? out_row_bytes - r0 * BC_ELEM_BITS / 8 : 0;
      if (len > BC_OB) len = BC_OB;
    };
    bc_write_col_rows(bc_smem, whole, vec_col, out_row, col_ld);
  }
#endif

#if BC_COLUMNWISE && !BC_COLREG
  // ---- columnwise: a task is the column pair (tc, tc + 1) x rows tr0 .. tr0 + BC_CH - 1
  {
    const int g = tid % BC_CG, seg = tid / BC_CG;
    const int tc = 2 * g, tr0 = seg * BC_CH;
    const i64 c = c0 + tc, r = r0 + tr0;
    const bool tlive = tid < BC_CTASKS;
    const u8 *col = tile + tr0 * BC_TS + tc * BC_S;
#if BC_CSCALES
    u8 *csc = bc_smem + BC_TR * BC_TS + BC_BMAX_BYTES + BC_PART_BYTES;
#endif
    // up to 16 rows the words stay in registers between amax and encode; taller tasks read them
    // again after a barrier (register pressure)
    bc_pw v[BC_CHOLD ? BC_CH : 1];
    if (BC_CHOLD && tlive) {
#pragma unroll
      for (int i = 0; i < BC_CH; i++) v[BC_CHOLD ? i : 0] = bc_pw_ld(col + i * BC_TS);
    }
    // per block: the encode factors of both columns
    float e0[BC_CNB], e1[BC_CNB];
    bool nosat = true;  // every block of both columns: amax x factor <= max
#pragma unroll
    for (int b = 0; b < BC_CNB; b++) {
      float m0, m1;
#if BC_2D
      // threads past the tasks (more threads than tasks: 512 threads, short tiles) have rows past
      // the tile's: their index would run past bmax, out of the CTA's shared memory
      m0 = m1 = tlive ? bmax[((tr0 + b * BC_CBH) / BC_BR) * BC_BMAX_COLS + tc / BC_BC] : 0.0f;
#else
      bc_pw mm = bc_pw_zero();
      if (tlive) {
#pragma unroll
        for (int i = 0; i < BC_CBH; i++) {
          const int ri = b * BC_CBH + i;
          mm = bc_pw_absmax(mm, BC_CHOLD ? v[BC_CHOLD ? ri : 0] : bc_pw_ld(col + ri * BC_TS));
        }
      }
#if BC_CSHARE > 1
      // the BC_CSHARE tasks of a block (same column pair, consecutive row runs) pool their amaxes
      bc_pw *part = (bc_pw *)(bc_smem + BC_TR * BC_TS);
      if (tlive) part[seg * BC_CG + g] = mm;
      __syncthreads();
      mm = bc_pw_zero();
      if (tlive)
#pragma unroll
        for (int k = 0; k < BC_CSHARE; k++) mm = bc_pw_absmax(mm, part[((seg / BC_CSHARE) * BC_CSHARE + k) * BC_CG + g]);
#endif
      m0 = bc_pw_lo(mm);
      m1 = bc_pw_hi(mm);
#endif
      const bc_bscale s0 = bc_block_scale_q(m0, ts, tl);
      const bc_bscale s1 = BC_2D ? s0 : bc_block_scale_q(m1, ts, tl);
      e0[b] = s0.enc;
      nosat = nosat && __fmul_rn(m0, s0.enc) <= BC_ELEM_MAX_FINITE && __fmul_rn(m1, s1.enc) <= BC_ELEM_MAX_FINITE;
      e1[b] = s1.enc;
      // view [cols, rows]: row c; block column r / CBR + b; 2D blocks are BC_BC view rows tall
#if BC_CSCALES
      if (tlive && seg % BC_CSHARE == 0) {  // staged: bc_csc_write below
        const int q = tr0 / BC_CBR + b;    // the tile's block row
        bc_csc_put(csc, tc * BC_CSB + q, s0.stored);
        bc_csc_put(csc, (tc + 1) * BC_CSB + q, s1.stored);
      }
#else
      const i64 sc = r / BC_CBR + b;
      if (tlive && c < cols && sc < col_sl.lcols && seg % BC_CSHARE == 0) {
        if (!BC_2D || col_sl.per_row) {
          bc_write_scale(col_scale, col_sl, c, sc, s0.stored);
          if (c + 1 < cols) bc_write_scale(col_scale, col_sl, c + 1, sc, s1.stored);
        } else if (tc % BC_BC == 0) {
          bc_write_scale(col_scale, col_sl, c / BC_BC, sc, s0.stored);
        }
      }
#endif
    }
#if !BC_CHOLD && BC_CSHARE == 1
    __syncthreads();  // the encode reads the words again
#endif
#define BC_CWORD(i) (BC_CHOLD ? v[BC_CHOLD ? (i) : 0] : bc_pw_ld(col + (i) * BC_TS))
#if BC_COL_TRANSPOSED
    // Output rows (tile columns) tc and tc + 1, BC_CH codes each, staged in shared memory over the
    // input tile after a barrier (every thread is past its reads), then written as 16-byte pieces
    // with consecutive lanes along an output row (whole 128-byte lines).
    u32 w[2][BC_CW];
#pragma unroll
    for (int k = 0; k < 2; k++)
#pragma unroll
      for (int i = 0; i < BC_CW; i++) w[k][i] = 0u;
    if (tlive) {
#if BC_SR_ALLOWED
      if (sr) {
        // one run of whole words at a time, element by element (rolled: Philox is large)
#pragma unroll
        for (int k = 0; k < 2; k++)
#pragma unroll
          for (int g = 0; g < BC_CW / BC_PACK_WG; g++) {
            const float e = k ? e1[(g * BC_PACK_WE) / BC_CBH] : e0[(g * BC_PACK_WE) / BC_CBH];
            u32 acc[BC_PACK_WG];
#pragma unroll
            for (int i = 0; i < BC_PACK_WG; i++) acc[i] = 0u;
#pragma unroll 1
            for (int j = 0; j < BC_PACK_WE; j++) {
              const int i = g * BC_PACK_WE + j;
              const float y = __fmul_rn(bc_staged(tile, tr0 + i, tc + k), e);
              bc_put_bits<BC_PACK_WG, BC_ELEM_BITS>(acc, bc_code_pos(j), bc_encode_one(y, 1, rng, (u64)(rows * cols + (c + k) * rows + r + i)));
            }
#pragma unroll
            for (int i = 0; i < BC_PACK_WG; i++) w[k][g * BC_PACK_WG + i] = acc[i];
          }
      } else
#endif
      {
#if BC_QUAD
#define BC_COL_QUADS(CLAMP)                                                                                  \
  _Pragma("unroll") for (int i = 0; i < BC_CH; i += 4) {                                                     \
    const bc_pw x0 = BC_CWORD(i), x1 = BC_CWORD(i + 1), x2 = BC_CWORD(i + 2), x3 = BC_CWORD(i + 3);          \
    const float a0 = bc_quad_factor(e0[i / BC_CBH]), a1 = bc_quad_factor(e1[i / BC_CBH]);                    \
    bc_pack_quad<CLAMP>(w[0], i, __fmul_rn(bc_pw_lo(x0), a0), __fmul_rn(bc_pw_lo(x1), a0),                   \
                        __fmul_rn(bc_pw_lo(x2), a0), __fmul_rn(bc_pw_lo(x3), a0));                           \
    bc_pack_quad<CLAMP>(w[1], i, __fmul_rn(bc_pw_hi(x0), a1), __fmul_rn(bc_pw_hi(x1), a1),                   \
                        __fmul_rn(bc_pw_hi(x2), a1), __fmul_rn(bc_pw_hi(x3), a1));                           \
  }
        if (BC_QUAD_FOLD && nosat) {
          BC_COL_QUADS(false)
        } else {
          BC_COL_QUADS(true)
        }
#undef BC_COL_QUADS
#elif BC_RAW2
        // 8 rows of each column at a time (a block holds 8k rows) as bf16 pairs: rows q, q + 4 for
        // 4-bit codes (bc_pack_raw8), else rows 2q, 2q + 1
        static_assert(BC_CH % 8 == 0 && BC_CBH % 8 == 0, "whole groups of 8 rows per block");
#pragma unroll
        for (int i = 0; i < BC_CH; i += 8) {
          u32 lo[4], hi[4];
#pragma unroll
          for (int q = 0; q < 4; q++) {
            const int ra = BC_ELEM_BITS == 4 ? q : 2 * q, rb = BC_ELEM_BITS == 4 ? q + 4 : 2 * q + 1;
            const bc_pw x0 = BC_CWORD(i + ra), x1 = BC_CWORD(i + rb);
            lo[q] = __byte_perm(x0, x1, 0x5410);
            hi[q] = __byte_perm(x0, x1, 0x7632);
          }
          bc_pack_raw8(w[0], i, lo[0], lo[1], lo[2], lo[3], bc_bf16x2_pow2(e0[i / BC_CBH]));
          bc_pack_raw8(w[1], i, hi[0], hi[1], hi[2], hi[3], bc_bf16x2_pow2(e1[i / BC_CBH]));
        }
#elif BC_RTO8
        static_assert(BC_CH % 8 == 0 && BC_CBH % 8 == 0, "whole groups of 8 rows per block");
#pragma unroll
        for (int i = 0; i < BC_CH; i += 8) {
          const float a0 = e0[i / BC_CBH], a1 = e1[i / BC_CBH];
          float y0[8], y1[8];
#pragma unroll
          for (int q = 0; q < 8; q++) {
            const bc_pw x = BC_CWORD(i + q);
            y0[q] = __fmul_rn(bc_pw_lo(x), a0);
            y1[q] = __fmul_rn(bc_pw_hi(x), a1);
          }
          bc_pack_rto8(w[0], i, y0);
          bc_pack_rto8(w[1], i, y1);
        }
#else
#pragma unroll
        for (int i = 0; i < BC_CH; i += 2) {
          const bc_pw x0 = BC_CWORD(i), x1 = BC_CWORD(i + 1);
          const float a0 = e0[i / BC_CBH], a1 = e1[i / BC_CBH];
          bc_pack_pair(w[0], i, __fmul_rn(bc_pw_lo(x0), a0), __fmul_rn(bc_pw_lo(x1), a0));
          bc_pack_pair(w[1], i, __fmul_rn(bc_pw_hi(x0), a1), __fmul_rn(bc_pw_hi(x1), a1));
        }
#endif
      }
    }
    __syncthreads();
    u8 *codes = bc_smem;
    const i64 out_row_bytes = rows * BC_ELEM_BITS / 8;
    // output row (tile column) j of the tile: its destination (rows col_ld bytes apart) and valid bytes
    auto out_row = [&](int j, u8 *&dst, i64 &len) {
      dst = col_data + (c0 + j) * col_ld + r0 * BC_ELEM_BITS / 8;
      len = c0 + j < cols ? out_row_bytes - r0 * BC_ELEM_BITS / 8 : 0;
      if (len > BC_OB) len = BC_OB;
    };
    if (tlive) {
#pragma unroll
      for (int k = 0; k < 2; k++) {
        u8 *dst;
        i64 len;
        out_row(tc + k, dst, len);
        bc_stage_words<BC_CW>(codes + (tc + k) * BC_CSTRIDE, tr0 * BC_ELEM_BITS / 8, w[k], !vec_col, dst);
      }
    }
    __syncthreads();
#if BC_CSCALES
    bc_csc_write(csc, col_scale, col_sl, r0, c0, cols, tid, whole);
#endif
    bc_write_col_rows(codes, whole, vec_col, out_row, col_ld);
#else
    if (tlive && c < cols && r < rows) {
      // rows r .. of the [rows, cols] output: the codes of columns c, c + 1 side by side, one
      // word per row; a task wholly inside (and 2-byte aligned for 8 bits) stores without checks
      const i64 row_bytes = col_ld;
      u8 *dst = col_data + r * row_bytes + c * BC_ELEM_BITS / 8;
      const bool pair = c + 1 < cols;
      const bool fast = pair && r + BC_CH <= rows && (BC_ELEM_BITS == 4 || vec_col) && !sr;
      if (fast) {
#pragma unroll
        for (int i = 0; i < BC_CH; i++) {
          const bc_pw x = BC_CWORD(i);
          u32 q = 0u;
          bc_pack_pair(&q, 0, __fmul_rn(bc_pw_lo(x), e0[i / BC_CBH]), __fmul_rn(bc_pw_hi(x), e1[i / BC_CBH]));
#if BC_ELEM_BITS == 8
          *(u16 *)dst = (u16)q;
#else
          *dst = (u8)q;
#endif
          dst += row_bytes;
        }
      } else {
        // edges, odd widths, stochastic rounding: rolled over the rows of each block
#pragma unroll
        for (int b = 0; b < BC_CNB; b++) {
#pragma unroll 1
          for (int ii = 0; ii < BC_CBH; ii++) {
            const int i = b * BC_CBH + ii;
            if (r + i >= rows) break;
            const bc_pw x = bc_pw_ld(col + i * BC_TS);
            const float x0 = __fmul_rn(bc_pw_lo(x), e0[b]), x1 = __fmul_rn(bc_pw_hi(x), e1[b]);
            u32 q = 0u;
#if BC_SR_ALLOWED
            if (sr) {
              const u64 e = rows * cols + c * rows + r + i;
              q = bc_encode_one(x0, 1, rng, e) << bc_code_pos(0);
              if (pair) q |= bc_encode_one(x1, 1, rng, e + rows) << bc_code_pos(1);
            } else
#endif
              bc_pack_pair(&q, 0, x0, x1);
            dst[0] = (u8)q;  // 4-bit: cols is even, a whole byte
#if BC_ELEM_BITS == 8
            if (pair) dst[1] = (u8)(q >> 8);
#endif
            dst += row_bytes;
          }
        }
      }
    }
#endif
#undef BC_CWORD
  }
#endif
}
