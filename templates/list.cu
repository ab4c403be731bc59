// templates/list.cu: the list variant of a kernel. The generator turns the kernel's entry into
// the device function bc_list_body (same parameters, plus the block index and grid it would have
// had: BC_BID and BC_GDIM are bc_vbid and bc_vgdim there) and appends this entry. One launch
// runs many items, each the single kernel's launch for one tensor: its arguments and its grid
// (gx x gy x gz blocks). Virtual blocks are numbered through the items in order: item i owns
// [first_i, first_{i+1}); a CUDA block (one virtual block) finds its item by a 32-ary search
// over `first` and runs the body with the block index it has in its item's own grid. Each tensor thus gets the blocks its single launch would have
// (work balanced by size; a tiny tensor takes one block, not a wave) and the same results bit
// for bit. The host packs an item as: i64 first; u32 gx, gy, gz, pad; then the arguments in
// order, each at a multiple of its size (8 for bc_sl): the C layout of this struct
// (runtime/multi/bc_list.c).
//
// Block quantize kernels (BC_LIST_PARAMS) have a second entry, ${KERNEL}_p, that takes the items
// in its kernel parameters (P, up to 32 KB of parameter space: CUDA 12.1 drivers and later, which
// every CUDA 13 build needs anyway); the host uses it for a launch whose items all fit and hold a
// large tensor. A block finds its item by a binary search that the whole block makes alike, so
// the compiler keeps the search and the item's fields in uniform registers and constant-bank
// operands, as in the single kernel, instead of the body's registers (ptxas: MXFP8 rowwise 40
// registers and no spill through P, 20 bytes of spill through the table; fp8_block_1x128 rowwise
// 8 against 48). One entry holding both paths inlined the body twice and spilled more (NVFP4
// rowwise 212 bytes). Where a list's items do not all fit but its large ones do, the host sends
// the large ones through P and the rest through the table in a second launch beside it
// (runtime/multi/bc_list.c: wants_split; tests/bench/NOTES.md, "Items in the kernel parameters").

struct bc_list_item {
  i64 first;
  u32 gx, gy, gz, pad;
  ${ITEM_FIELDS}
};

#define BC_LIST_LOOP ${LIST_LOOP}
#define BC_LIST_PARAMS ${LIST_PARAMS}

extern "C" __global__ void ${LAUNCH_BOUNDS}
${KERNEL}(const bc_list_item *__restrict__ items, int n, u32 total) {
#if BC_LIST_LOOP
  // virtual blocks grid-stride (the thin kernels): one each where the launch has a block for
  // every one, several where the host caps the grid (a stage's small groups beside its large
  // one, runtime/multi/bc_list.c), a barrier between them. Only where the generator asks for it:
  // the loop made ptxas spill in the tile kernels (NVFP4 rowwise 8 -> 140 bytes)
  for (u32 b = blockIdx.x; b < total; b += gridDim.x) {
    if (b != blockIdx.x) __syncthreads();
#else
  {
    const u32 b = blockIdx.x;
#endif
    // 32-ary search, every warp on its own: each lane tests one of 32 evenly spaced items, the
    // lanes whose item starts at or before this block form a prefix (items are in block order),
    // the last of them bounds the next round. 2 rounds for 1000 items, 3 for 32768 (a binary
    // search's 10 to 15 dependent loads cost ~1 us per block: 20% of a bandwidth-bound launch).
    const int lane = threadIdx.x & 31;
    int lo = 0, hi = n;  // the item is in [lo, hi)
    while (hi - lo > 1) {
      const int step = (hi - lo + 31) >> 5;
      const int i = lo + lane * step;
      const unsigned m = __ballot_sync(0xFFFFFFFFu, i < hi && items[i].first <= (i64)b);
      lo += (__popc(m) - 1) * step;
      hi = min(lo + step, hi);
    }
    const bc_list_item &it = items[lo];
    const u32 v = b - (u32)it.first;
    const uint3 bid = it.gy == 1 && it.gz == 1 ? make_uint3(v, 0u, 0u)
                                               : make_uint3(v % it.gx, v / it.gx % it.gy, v / (it.gx * it.gy));
    bc_list_body(${CALL_ARGS}, bid, make_uint3(it.gx, it.gy, it.gz));
  }
}

#if BC_LIST_PARAMS
// 8 + NP * (sizeof(item) + 4) <= BC_LIST_PARAM_BYTES, under CUDA's 32764 bytes of parameters
// (runtime/multi/bc_list.c computes NP the same way: 125 items of block quantize's 256 bytes)
#define BC_LIST_PARAM_BYTES 32736
#define BC_LIST_NP ((BC_LIST_PARAM_BYTES - 8) / (sizeof(bc_list_item) + 4))
struct bc_list_params {
  u32 np, pad;                 // items [0, np)
  bc_list_item it[BC_LIST_NP];
  u32 firsts[BC_LIST_NP];      // it[i].first: the search reads these, 4 bytes apart
};

extern "C" __global__ void ${LAUNCH_BOUNDS}
${KERNEL}_p(const __grid_constant__ bc_list_params P) {
  {
    const u32 b = blockIdx.x;
    int lo = 0, hi = (int)P.np;  // binary search, the same in every thread
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if (P.firsts[mid] <= b) lo = mid;
      else hi = mid;
    }
    const bc_list_item &it = P.it[lo];
    const u32 v = b - (u32)it.first;
    const uint3 bid = it.gy == 1 && it.gz == 1 ? make_uint3(v, 0u, 0u)
                                               : make_uint3(v % it.gx, v / it.gx % it.gy, v / (it.gx * it.gy));
    bc_list_body(${CALL_ARGS}, bid, make_uint3(it.gx, it.gy, it.gz));
  }
}
#endif
