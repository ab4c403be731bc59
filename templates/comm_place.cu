// templates/comm_place.cu: assemble one buffer of a gathered quantized tensor [rows, cols] from
// the slabs of the ranks (runtime/comm: the all-gather). Rank r holds tensor rows
// [row0[r], row0[r + 1]) and sent the quantized slab of tensor rows [a[r], a[r] + s[r]) (whole
// blocks around its rows) at byte offset off[r] of src. Each output entry is taken from the slab
// of the rank that holds its tensor row (a block: the block's first row), so every entry has one
// writer, and an entry of a block that straddles ranks comes from a slab quantized with that
// block's true amax. The source may be another direction of the same format: the columnwise data
// of per-tensor and 2D-block formats is the transpose of the rowwise data, and their columnwise
// scales are the rowwise block scales.
//
// A direction's layout (bc_pdir) is the rule of fmt/bc_layout.c without the dims, which follow
// from the row count (the gathered tensor's, or a slab's): the view is [rows, cols] (rowwise) or
// [cols, rows] (columnwise); data is the view, or its transpose; scales are one entry per view
// row (per_row) or per vbr view rows, and per vbc view cols, stored row-major (order 0), transposed
// (1) or in the 128x4 GEMM swizzle (2), padded to multiples of pad_r x pad_c. 4-bit data packs
// two elements per byte, element 2j in the low nibble unless high_first. The output's scale
// layout comes from the host (og: bci_geom_get's, the bc_sl of common.cuh); a slab's is derived
// here from its row count.
//
// scales = 0: one thread per output data byte; 1: one per stored scale entry (padding -> zeros);
// output rows along the grid's y, their bytes or entries along x.

#define BC_PLACE_MAX_RANKS 64
struct bc_pdir {
  int col, view, bits, per_row, vbr, vbc, order, pad_r, pad_c, high_first;
};
struct bc_psrc {
  i64 nranks;
  i64 row0[BC_PLACE_MAX_RANKS + 1];
  i64 a[BC_PLACE_MAX_RANKS], s[BC_PLACE_MAX_RANKS], off[BC_PLACE_MAX_RANKS];
};

static __device__ __forceinline__ i64 bc_cdiv(i64 a, i64 b) { return (a + b - 1) / b; }
static __device__ __forceinline__ i64 bc_rup(i64 a, i64 m) { return bc_cdiv(a, m) * m; }

// the compact scale layout of a slab of `rows` rows (fmt/bc_layout.c: bci_geom_get), as the
// bc_sl of common.cuh (addressed by bc_sl_offset); order 2 (swizzled) for a swizzled input
static __device__ bc_sl bc_scale_geo(const bc_pdir &d, i64 rows, i64 cols) {
  const i64 vr = d.col ? cols : rows, vc = d.col ? rows : cols;
  bc_sl g;
  g.order = d.order;
  g.per_row = d.per_row;
  g.lrows = d.per_row ? vr : bc_cdiv(vr, d.vbr);
  g.lcols = bc_cdiv(vc, d.vbc);
  if (d.order == 0) {
    g.prows = bc_rup(g.lrows, d.pad_r);
    g.pcols = bc_rup(g.lcols, d.pad_c);
    g.ld = g.pcols;
  } else if (d.order == 1) {
    g.pcols = bc_rup(g.lcols, d.pad_r);
    g.prows = bc_rup(g.lrows, d.pad_c);
    g.ld = g.prows;
  } else {
    g.prows = bc_rup(g.lrows, 128);
    g.pcols = bc_rup(g.lcols, 4);
    g.ld = g.pcols;
  }
  return g;
}

// the rank whose rows hold tensor row m (ranks without rows hold none)
static __device__ __forceinline__ int bc_owner(const bc_psrc &t, i64 m) {
  int lo = 0, hi = (int)t.nranks - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (t.row0[mid] <= m) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// code of tensor element (m, k) in rank r's slab, in direction sd's data layout
static __device__ __forceinline__ u32 bc_slab_code(const u8 *__restrict__ src, const bc_psrc &t, const bc_pdir &sd, i64 cols,
                                                   int r, i64 m, i64 k) {
  const i64 lm = m - t.a[r], srows = t.s[r];
  const i64 vr = sd.col ? k : lm, vc = sd.col ? lm : k;
  const i64 vcols = sd.col ? srows : cols, vrows = sd.col ? cols : srows;
  const i64 dcols = sd.view ? vcols : vrows;
  const i64 idx = sd.view ? vr * dcols + vc : vc * dcols + vr;
  const u8 *p = src + t.off[r];
  if (sd.bits == 8) return p[idx];
  const u32 b = p[idx >> 1];
  const int hi = (int)(idx & 1) ^ sd.high_first;
  return hi ? b >> 4 : b & 15u;
}

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(u8 *__restrict__ dst, i64 rows, i64 cols, bc_pdir od, bc_sl og, int scales, const u8 *__restrict__ src, bc_pdir sd,
          bc_psrc tp) {
  // the rank table into shared memory, each word read from the parameters at a constant offset
  // (an indexed parameter array would be copied to every thread's local memory)
  __shared__ bc_psrc t;
  {
    const i64 *from = &tp.nranks;
    i64 *to = &t.nranks;
    constexpr int words = sizeof(bc_psrc) / sizeof(i64);
#pragma unroll
    for (int i = 0; i < words; i++)
      if (i % BC_THREADS == (int)threadIdx.x) to[i] = from[i];
  }
  __syncthreads();
  const i64 vrows = od.col ? cols : rows, vcols = od.col ? rows : cols;
  // a 2D grid: output rows along y, their bytes (entries) along x; no division per element
  if (!scales) {
    const i64 drows = od.view ? vrows : vcols, dcols = od.view ? vcols : vrows;
    const int per = 8 / od.bits;
    const i64 rb = dcols / per;
    // Output and slab rows run the same way (the transposed columnwise data of 1D formats): an
    // output row is the ranks' slab rows side by side. Each thread takes 16 output bytes; a run
    // from one rank whose source starts on a byte is 16 independent byte loads and one store
    // (wide when aligned); a run that crosses ranks or starts mid-byte goes element by element.
    const int runs = od.view && sd.view && od.col == sd.col;
    const i64 nch = (rb + 15) / 16;
    // the widest store every run start allows (16, 8, 4 or 1 bytes): narrow stores at a 16-byte
    // stride would each touch a sector of their own
    int wide = 16;
    while (wide > 1 && (((u64)dst % wide) != 0 || rb % wide != 0)) wide /= 2;
    if (wide == 2) wide = 1;
#pragma unroll 1
    for (i64 dr = BC_BID.y; dr < drows; dr += BC_GDIM.y)
#pragma unroll 1
      for (i64 ch = (i64)BC_BID.x * BC_THREADS + threadIdx.x; ch < nch; ch += (i64)BC_GDIM.x * BC_THREADS) {
        const i64 j0 = ch * 16, nb = rb - j0 < 16 ? rb - j0 : 16;
        u8 *o = dst + dr * rb + j0;
        if (runs) {
          // the run's first and last elements: tensor rows m0, m1 (view columns) of row k = dr
          const i64 m0 = j0 * per, m1 = (j0 + nb) * per - 1;
          const int r = bc_owner(t, m0);
          const i64 lm = m0 - t.a[r];
          if (bc_owner(t, m1) == r && (per == 1 || (lm & 1) == 0)) {
            const u8 *p = src + t.off[r] + (dr * t.s[r] + lm) / per;
            u8 b[16];
#pragma unroll
            for (int i = 0; i < 16; i++) b[i] = i < nb ? p[i] : 0;
            u32 w[4];
#pragma unroll
            for (int i = 0; i < 4; i++) w[i] = (u32)b[4 * i] | ((u32)b[4 * i + 1] << 8) | ((u32)b[4 * i + 2] << 16) | ((u32)b[4 * i + 3] << 24);
            if (wide == 16 && nb == 16) {
              *(uint4 *)o = make_uint4(w[0], w[1], w[2], w[3]);
            } else if (wide == 8 && nb % 8 == 0) {
              for (int i = 0; i < nb / 8; i++) ((uint2 *)o)[i] = make_uint2(w[2 * i], w[2 * i + 1]);
            } else if (wide == 4 && nb % 4 == 0) {
              for (int i = 0; i < nb / 4; i++) ((u32 *)o)[i] = w[i];
            } else {
              for (int i = 0; i < nb; i++) o[i] = b[i];
            }
            continue;
          }
        }
        for (int jb = 0; jb < nb; jb++) {
          const i64 j = j0 + jb;
          u32 byte = 0;
          for (int e = 0; e < per; e++) {
            const i64 dc = j * per + e;
            const i64 vr = od.view ? dr : dc, vc = od.view ? dc : dr;
            const i64 m = od.col ? vc : vr, k = od.col ? vr : vc;
            const u32 code = bc_slab_code(src, t, sd, cols, bc_owner(t, m), m, k);
            const int sh = per == 1 ? 0 : ((e ^ od.high_first) ? 4 : 0);
            byte |= code << sh;
          }
          o[jb] = (u8)byte;
        }
      }
    return;
  }
  const int eb = od.bits / 8;
#pragma unroll 1
  for (i64 lr = BC_BID.y; lr < og.prows; lr += BC_GDIM.y)
#pragma unroll 1
    for (i64 lc = (i64)BC_BID.x * BC_THREADS + threadIdx.x; lc < og.pcols; lc += (i64)BC_GDIM.x * BC_THREADS) {
      u8 *o = dst + bc_sl_offset(og, lr, lc) * eb;
      if (lr >= og.lrows || lc >= og.lcols) {
        for (int b = 0; b < eb; b++) o[b] = 0;
        continue;
      }
      // the block's first element in the tensor, its rank, and the entry in that rank's slab
      const i64 vr0 = od.per_row ? lr : lr * od.vbr, vc0 = lc * od.vbc;
      const i64 m0 = od.col ? vc0 : vr0, k0 = od.col ? vr0 : vc0;
      const int r = bc_owner(t, m0);
      const i64 lm = m0 - t.a[r];
      const i64 svr = sd.col ? k0 : lm, svc = sd.col ? lm : k0;
      const bc_sl sg = bc_scale_geo(sd, t.s[r], cols);
      const i64 at = bc_sl_offset(sg, sd.per_row ? svr : svr / sd.vbr, svc / sd.vbc);
      const u8 *p = src + t.off[r] + at * eb;
      for (int b = 0; b < eb; b++) o[b] = p[b];
    }
}
