// templates/shard_sctr.cu: the columnwise block scales of a 2D-block format from its rowwise ones
// (runtime/comm: bc_shard_finish, after the gather): a 2D block is one block in both directions,
// so columnwise entry (i, j) is the scale of the block whose first element is input element
// (j * bh, per-row columnwise scales ? i : i * bw), which the rowwise layout keeps at
// (per-row rowwise scales ? j * bh : j, its column / bw). Every entry of the output layout is
// written: its padding as zeros, as the quantize kernels write it.

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const u8 *__restrict__ rs, bc_sl rsl, u8 *__restrict__ cs, bc_sl csl, i64 bh, i64 bw, int sbytes) {
  const i64 n = csl.prows * csl.pcols;
#pragma unroll 1
  for (i64 q = (i64)BC_BID.x * BC_THREADS + threadIdx.x; q < n; q += (i64)BC_GDIM.x * BC_THREADS) {
    const i64 i = q / csl.pcols, j = q % csl.pcols;
    const i64 to = bc_sl_offset(csl, i, j);
    u32 v = 0;
    if (i < csl.lrows && j < csl.lcols) {
      const i64 c = csl.per_row ? i : i * bw; // the block's first input column
      const i64 from = bc_sl_offset(rsl, rsl.per_row ? j * bh : j, c / bw);
      v = sbytes == 4 ? ((const u32 *)rs)[from] : rs[from];
    }
    if (sbytes == 4) ((u32 *)cs)[to] = v;
    else cs[to] = (u8)v;
  }
}
