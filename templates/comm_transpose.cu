// templates/comm_transpose.cu: out[cols, rows] = the transpose of in[rows, cols], elements of
// `bits` (8, or 4: two per byte, element 2j in the low nibble unless high_first). The columnwise
// copy of per-tensor and 2D-block formats built from the gathered rowwise data
// (runtime/comm: bc_all_gather). 64 x 64 element tiles through shared memory, so that both the
// reads (along in's rows) and the writes (along out's rows) are coalesced; 4-bit tiles pair
// elements 2i, 2i + 1 of an output row into one byte (rows of the input are even in number: the
// layout of 4-bit columnwise data needs it). Needs BC_THREADS >= 256.

#define BC_TT 64

static __device__ __forceinline__ u32 bc_tr_get(const u8 *__restrict__ p, i64 i, int bits, int high_first) {
  if (bits == 8) return p[i];
  const u32 b = p[i >> 1];
  return ((int)(i & 1) ^ high_first) ? b >> 4 : b & 15u;
}

// A full tile. vin: the input rows are 16-byte aligned: one 16-byte load per thread (8-bit: 64
// rows x 4 vectors; 4-bit: 64 rows x 2); vout: the output rows are: one 16-byte store per
// thread; otherwise element by element.
static __device__ __forceinline__ void bc_tr_tile_full(const u8 *__restrict__ in, i64 rows, i64 cols, u8 *__restrict__ out,
                                                       int bits, int high_first, i64 r0, i64 c0, int vin, int vout,
                                                       u8 (*tile)[BC_TT + 4]) {
  const int t = threadIdx.x;
  const int per = 8 / bits;
  if (!vin) {
#pragma unroll 4
    for (int i = t; i < BC_TT * BC_TT; i += BC_THREADS)
      tile[i / BC_TT][i % BC_TT] = (u8)bc_tr_get(in, (r0 + i / BC_TT) * cols + c0 + i % BC_TT, bits, high_first);
  } else if (bits == 8) {
    if (t < 256) {
      const int lr = t / 4, q = t % 4;
      const uint4 v = *(const uint4 *)(in + (r0 + lr) * cols + c0 + q * 16);
      const u32 w[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
      for (int i = 0; i < 16; i++) tile[lr][q * 16 + i] = (u8)(w[i / 4] >> (8 * (i % 4)));
    }
  } else if (t < 128) {
    const int lr = t / 2, h = t % 2;
    const uint4 v = *(const uint4 *)(in + ((r0 + lr) * cols + c0) / 2 + h * 16);
    const u32 w[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
    for (int i = 0; i < 32; i++) {
      const u32 b = w[i / 8] >> (8 * ((i / 2) % 4));
      tile[lr][h * 32 + i] = (u8)(((i & 1) ^ high_first) ? (b >> 4) & 15u : b & 15u);
    }
  }
  __syncthreads();
  if (!vout) {
    const int bpr = BC_TT / per;
#pragma unroll 4
    for (int i = t; i < BC_TT * bpr; i += BC_THREADS) {
      const int oc = i / bpr, ob = i % bpr;
      u32 v;
      if (per == 1) v = tile[ob][oc];
      else {
        const u32 a = tile[ob * 2][oc], b = tile[ob * 2 + 1][oc];
        v = high_first ? (a << 4) | b : a | (b << 4);
      }
      const i64 o = (c0 + oc) * rows + r0 + (i64)ob * per;
      out[per == 1 ? o : o >> 1] = (u8)v;
    }
  } else if (bits == 8) {
    if (t < 256) {
      const int oc = t / 4, q = t % 4;
      u32 w[4];
#pragma unroll
      for (int j = 0; j < 4; j++)
        w[j] = (u32)tile[q * 16 + 4 * j][oc] | ((u32)tile[q * 16 + 4 * j + 1][oc] << 8) | ((u32)tile[q * 16 + 4 * j + 2][oc] << 16) |
               ((u32)tile[q * 16 + 4 * j + 3][oc] << 24);
      *(uint4 *)(out + (c0 + oc) * rows + r0 + q * 16) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  } else if (t < 128) {
    const int oc = t / 2, h = t % 2;
    u32 w[4] = { 0, 0, 0, 0 };
#pragma unroll
    for (int i = 0; i < 16; i++) {
      const u32 a = tile[h * 32 + 2 * i][oc], b = tile[h * 32 + 2 * i + 1][oc];
      w[i / 4] |= (high_first ? (a << 4) | b : a | (b << 4)) << (8 * (i % 4));
    }
    *(uint4 *)(out + ((c0 + oc) * rows + r0) / 2 + h * 16) = make_uint4(w[0], w[1], w[2], w[3]);
  }
  __syncthreads();
}

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const u8 *__restrict__ in, i64 rows, i64 cols, u8 *__restrict__ out, int bits, int high_first, i64 tiles_c, i64 ntiles,
          int vin, int vout) {
  __shared__ u8 tile[BC_TT][BC_TT + 4];
  const int per = 8 / bits;
#pragma unroll 1
  for (i64 t = BC_BID.x; t < ntiles; t += BC_GDIM.x) {
    const i64 tr = t / tiles_c, tc = t - tr * tiles_c;
    const i64 r0 = tr * BC_TT, c0 = tc * BC_TT;
    if (r0 + BC_TT <= rows && c0 + BC_TT <= cols) {
      // the vector paths give each of 256 threads one vector: fewer threads take the element paths
      bc_tr_tile_full(in, rows, cols, out, bits, high_first, r0, c0, BC_THREADS >= 256 && vin, BC_THREADS >= 256 && vout, tile);
      continue;
    }
    // load: 64 input rows x 64 elements (row-major in the tile)
#pragma unroll 4
    for (int i = threadIdx.x; i < BC_TT * BC_TT; i += BC_THREADS) {
      const int lr = i / BC_TT, lc = i % BC_TT;
      const i64 r = r0 + lr, c = c0 + lc;
      tile[lr][lc] = (r < rows && c < cols) ? (u8)bc_tr_get(in, r * cols + c, bits, high_first) : 0;
    }
    __syncthreads();
    // store: 64 output rows (input columns) x 64 elements (input rows), per bytes
    const int bpr = BC_TT / per; // bytes of an output row in the tile
#pragma unroll 4
    for (int i = threadIdx.x; i < BC_TT * bpr; i += BC_THREADS) {
      const int oc = i / bpr, ob = i % bpr;
      const i64 c = c0 + oc, r = r0 + (i64)ob * per;
      if (c >= cols || r >= rows) continue;
      u32 v;
      if (per == 1) v = tile[ob][oc];
      else {
        const u32 a = tile[ob * 2][oc], b = tile[ob * 2 + 1][oc];
        v = high_first ? (a << 4) | b : a | (b << 4);
      }
      const i64 o = c * rows + r;
      out[per == 1 ? o : o >> 1] = (u8)v;
    }
    __syncthreads();
  }
}
