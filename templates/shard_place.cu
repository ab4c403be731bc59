// templates/shard_place.cu: the codes and block scales of the elements a rank's shard holds,
// from the quantized region of rows [r0, r0 + nr) of a [rows, cols] weight (t*, dense, compact
// scales) to their places in the whole weight's buffers (d*) (runtime/comm: bc_shard_cast).
// Nothing else of d* changes: a byte that also holds another rank's 4-bit element is read, its
// own nibble replaced, and written back; a 16-byte piece the run ends in is read, merged and
// written whole, its other bytes with the values they held (so no other writer may touch that
// piece of d* meanwhile: each rank casts into buffers of its own).
//   data (do_data): mode 0, data stored as the input ([r, c]: rowwise, MXFP8 columnwise), or 1,
//   transposed ([c, r]). A thread per (data row of the region, 16-byte piece slot of the row),
//   consecutive threads along a row (the transposed rows of a slab are a few pieces long: a warp
//   per row left most lanes idle, mxfp4's slab placement took 27.6 us for 0.5 MB on the H200). In
//   a data row the shard holds one run of elements (a contiguous range of the flattened weight
//   meets a row, or a column, in one interval), so a piece inside the run is one 16-byte copy
//   when both sides are aligned, a piece the run ends in one 16-byte read-merge-write (the bytes
//   and nibbles outside the run written back as they were), else byte by byte.
//   scales (do_data 0, sbytes 1 or 4): the entry of a block goes with the block's first element
//   (per_row: of the row's part of the block); the view is the input (view_col 0) or its
//   transpose (1), blocks vbr x vbc in the view. A thread per (row of the region's scale matrix,
//   entry), for the entries whose block's first element the shard holds.

static __device__ __forceinline__ void bc_place_byte(const u8 *__restrict__ t, u8 *__restrict__ d, i64 b, i64 lo, i64 hi, int epb,
                                                     int high_first) {
  // byte b of the row holds elements [b * epb, b * epb + epb); the run is [lo, hi)
  const i64 e0 = b * epb;
  const int own0 = e0 >= lo && e0 < hi, own1 = epb == 2 && e0 + 1 >= lo && e0 + 1 < hi;
  if (!own0 && !own1) return;
  if (epb == 1 || (own0 && own1)) {
    d[b] = t[b];
    return;
  }
  const u8 mask = (u8)(0xFu << (4 * ((own0 ? 0 : 1) ^ high_first)));
  d[b] = (u8)((d[b] & ~mask) | (t[b] & mask));
}

// the k with lo <= k * step + off < hi, k in [0, n): [ceil((lo - off) / step), ceil((hi - off) / step)) clipped
static __device__ __forceinline__ void bc_place_run(i64 lo, i64 hi, i64 off, i64 step, i64 n, i64 *a, i64 *b) {
  const i64 x = lo - off, y = hi - off;
  *a = x <= 0 ? 0 : (x + step - 1) / step;
  *b = y <= 0 ? 0 : min((y + step - 1) / step, n);
}

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const u8 *__restrict__ tdata, u8 *__restrict__ ddata, const u8 *__restrict__ tscale, u8 *__restrict__ dscale, bc_sl tsl,
          bc_sl dsl, i64 s, i64 e, i64 rows, i64 cols, i64 r0, i64 nr, int bits, int high_first, int mode, int do_data, int view_col,
          int vbr, int vbc, int per_row, int sbytes) {
  // flat over (row, slot): the grid's x and y only count threads
  const i64 tid = ((i64)BC_BID.y * BC_GDIM.x + BC_BID.x) * BC_THREADS + threadIdx.x;
  const i64 nth = (i64)BC_GDIM.x * BC_GDIM.y * BC_THREADS;
  if (do_data) {
    const int epb = 8 / bits;
    const i64 trows = mode ? cols : nr, telems = mode ? nr : cols; // the region's data rows, elements per row
    const i64 rb = telems / epb;                                   // bytes per row
    const i64 P = rb / 16 + 2;                                     // piece slots of a row: its run's bytes at any offset
#pragma unroll 1
    for (i64 u = tid; u < trows * P; u += nth) {
      const i64 y = u / P, j = u - y * P;
      i64 lo, hi; // the run the shard holds in this data row, in the row's element indices
      if (mode == 0) bc_place_run(s, e, (r0 + y) * cols, 1, cols, &lo, &hi);       // flat (r0 + y) * cols + k
      else bc_place_run(s, e, y + r0 * cols, cols, nr, &lo, &hi);                  // flat (r0 + k) * cols + y
      const i64 blo = lo / epb, bhi = (hi + epb - 1) / epb; // bytes touching the run
      const i64 b0 = (blo / 16 + j) * 16;
      if (hi <= lo || b0 >= bhi) continue;
      const u8 *t = tdata + y * rb;
      u8 *d = mode == 0 ? ddata + (r0 + y) * cols / epb : ddata + (y * rows + r0) / epb;
      const int vec = ((((u64)t) | ((u64)d)) & 15) == 0;
      if (vec && b0 * epb >= lo && (b0 + 16) * epb <= hi) {
        *(uint4 *)(d + b0) = *(const uint4 *)(t + b0);
      } else if (vec && b0 + 16 <= rb) {
        // the owned bytes and nibbles of the piece as a mask (the run is one interval)
        u32 m[4] = { 0u, 0u, 0u, 0u };
#pragma unroll
        for (int i = 0; i < 16; i++) {
          const i64 e0 = (b0 + i) * epb;
          const int o0 = e0 >= lo && e0 < hi, o1 = epb == 2 && e0 + 1 >= lo && e0 + 1 < hi;
          const u32 bm = epb == 1 ? (o0 ? 0xFFu : 0u) : (o0 ? (high_first ? 0xF0u : 0x0Fu) : 0u) | (o1 ? (high_first ? 0x0Fu : 0xF0u) : 0u);
          m[i >> 2] |= bm << (8 * (i & 3));
        }
        const uint4 tv = *(const uint4 *)(t + b0);
        uint4 dv = *(const uint4 *)(d + b0);
        dv.x = (dv.x & ~m[0]) | (tv.x & m[0]);
        dv.y = (dv.y & ~m[1]) | (tv.y & m[1]);
        dv.z = (dv.z & ~m[2]) | (tv.z & m[2]);
        dv.w = (dv.w & ~m[3]) | (tv.w & m[3]);
        *(uint4 *)(d + b0) = dv;
      } else {
#pragma unroll 1
        for (i64 b = max(b0, blo); b < min(b0 + 16, bhi); b++) bc_place_byte(t, d, b, lo, hi, epb, high_first);
      }
    }
    return;
  }
  if (!sbytes) return;
  const i64 ne = tsl.lcols; // entry slots of a scale row
#pragma unroll 1
  for (i64 u = tid; u < tsl.lrows * ne; u += nth) {
    const i64 sr = u / ne, j = u - sr * ne;
    // entry (sr, j): its block's first element is (vr, j * vbc) in the region's view
    const i64 vr = per_row ? sr : sr * vbr;
    i64 ja, jb;
    if (!view_col) bc_place_run(s, e, (r0 + vr) * cols, vbc, tsl.lcols, &ja, &jb);       // flat (r0 + vr) * cols + j * vbc
    else bc_place_run(s, e, vr + r0 * cols, (i64)vbc * cols, tsl.lcols, &ja, &jb);       // flat (r0 + j * vbc) * cols + vr
    if (j < ja || j >= jb) continue;
    const i64 dvr = view_col ? vr : r0 + vr, drow = per_row ? dvr : dvr / vbr;           // the entry's row in d
    const i64 dj0 = view_col ? r0 / vbc : 0;                                             // its first column in d
    const i64 to = bc_sl_offset(dsl, drow, dj0 + j), from = bc_sl_offset(tsl, sr, j);
    if (sbytes == 4) ((u32 *)dscale)[to] = ((const u32 *)tscale)[from];
    else dscale[to] = tscale[from];
  }
}
