/* multi/bc_list.c: the operations of blockcast.h on lists of tensors, one launch per kernel.
 *
 * Each tensor goes through the same code as its single call (ops/: checks, kernel choice, grid,
 * arguments) with a sink that records the launches instead of making them. The records are then
 * grouped by (stage, kernel): a tensor's k-th launch is stage k, and every stage of every tensor
 * runs before the next stage of any (a per-tensor quantize is zero -> amax -> scale -> cast).
 * Each group is one launch of the kernel's list variant (templates/list.cu) over a table of items:
 * the recorded grid and packed arguments of each tensor. All tables of a call are built in one
 * pinned host buffer (a chunk), copied on the caller's stream into the chunk's device buffer and
 * read there by the launches; an event recorded after the last launch frees the chunk for a
 * later call. Nothing waits on the host unless all BCI_LIST_CHUNKS chunks of the context are
 * still in flight (then the call waits for the oldest). A group whose blocks pass 2^31 - 1 is
 * split into several launches. A stage of several groups runs its smaller ones on the context's
 * side stream beside the largest (side_ctas below); the caller's stream waits for it at the end
 * of the stage.
 *
 * Host memory: the sink, the group and interval tables and the chunks belong to the context and
 * are reused (no allocation per tensor or per call once warm; a chunk grows to the largest call).
 * They are guarded by a lock, so one context may run list calls from several threads (one at a
 * time). */
#include <stdlib.h>
#include <string.h>

#include "multi/bc_multi.h"

/* tables of calls in flight: bc_shard_cast flushes up to 5 lists a call, and a benchmark (or a
 * training step) queues several calls behind work still running: 16 made the host wait in
 * bench_shard's 5 queued NVFP4 calls (8 ms a call) */
#define BCI_LIST_CHUNKS 64
#define BCI_MAX_BLOCKS 0x7FFFFFFFLL
#define SMALL_ITEM 16 /* blocks */
#define BCI_LIST_PARAM_BYTES 32736 /* templates/list.cu: BC_LIST_PARAM_BYTES */

typedef struct chunk {
  void *host;
  CUdeviceptr dev;
  size_t cap;
  CUevent done;
  CUcontext cu;
  int used;
} chunk;

typedef struct group {
  const bci_kernel *k, *list; /* the kernel and its list variant */
  int stage, smem;
  unsigned threads;
  size_t count, stride, off, fill; /* items, bytes per item, offset in the table, items written */
  int64_t blocks, big;             /* of all its items; of its largest item */
  size_t large;                    /* items of more than SMALL_ITEM blocks */
  int split;                       /* its large items in a launch of their own (wants_split) */
} group;

typedef struct segment {
  size_t group, off, count; /* a launch: `count` items at `off` of the table */
  int64_t blocks;
  int large; /* the large items of a split group */
} segment;

struct bci_list_state {
  pthread_mutex_t lock;
  bci_sink sink;
  group *groups;
  size_t ngroups, cap_groups;
  size_t *rec_group;
  size_t cap_rec_group;
  segment *segs;
  size_t nsegs, cap_segs;
  size_t *cur_seg; /* per group: its open segment */
  size_t cap_cur_seg;
  size_t *order; /* the groups in launch order */
  size_t cap_order;
  bci_span *spans, *spans_tmp;
  size_t nspans, cap_spans, cap_spans_tmp;
  chunk chunks[BCI_LIST_CHUNKS];
  unsigned next_wait;
  /* a stage's small groups run on a side stream beside its largest group */
  bci_side side;
  int side_k; /* side_ctas(), read when the context is made */
  unsigned char *pbuf; /* a launch's items as kernel parameters (param_items) */
};

/* Side stream. A stage of several groups (block-format quantize: the tile kernel's items and the
 * thin kernel's, tests/bench/bench_list's mix) would run them one after the other, and the thin
 * kernel's latency-bound blocks (one-row / one-column tensors) then run alone at the end of the
 * stage. Instead the groups other than the largest go first on a side stream of the context's
 * highest priority, the thin kernels' grid capped at BLOCKCAST_LIST_SIDE CTAs a SM (default 1; 0
 * turns the side stream off), their list variants looping over their blocks (templates/list.cu,
 * BC_LIST_LOOP); the largest group runs on the caller's stream beside them, and the caller's
 * stream waits for the side stream before the next stage. Measured on an H100 (bench_list,
 * tests/bench/results/2026-11-26-h100-list-side.md): block-format quantize lists -5 to -33 us;
 * at the default priority the side groups were scheduled after the large launch (slower). */
static int side_ctas(void) {
  const char *e = getenv("BLOCKCAST_LIST_SIDE");
  if (!e || !*e) return 1;
  const int k = atoi(e);
  return k > 0 ? k : 0;
}

/* the thin kernels' list variants loop over their virtual blocks (gen/blockcast.lua: LIST_LOOP is
 * set for the family quantize_thin, whose kernels are named bc_quantize_thin_*) */
static int list_loops(const bci_kernel *k) { return !strncmp(k->name, "bc_quantize_thin_", 17); }

int bci_list_side_on(bc_ctx *ctx) { return ctx->list && ctx->list->side_k > 0; }

bc_status bci_list_init(bc_ctx *ctx) {
  ctx->list = calloc(1, sizeof *ctx->list);
  if (!ctx->list) return bci_fail(ctx, BC_ERR_NOMEM, "out of memory creating the context's list buffers");
  pthread_mutex_init(&ctx->list->lock, NULL);
  ctx->list->side_k = side_ctas();
  ctx->list->pbuf = calloc(1, BCI_LIST_PARAM_BYTES);
  if (!ctx->list->pbuf) {
    bci_list_free(ctx);
    return bci_fail(ctx, BC_ERR_NOMEM, "out of memory creating the context's list buffers");
  }
  return BC_OK;
}

void bci_list_free(bc_ctx *ctx) {
  struct bci_list_state *st = ctx->list;
  if (!st) return;
  bci_side_drop(&st->side);
  for (int i = 0; i < BCI_LIST_CHUNKS; i++) {
    chunk *c = &st->chunks[i];
    if (c->used) bci_cu.EventSynchronize(c->done);
    if (c->done) bci_cu.EventDestroy(c->done);
    if (c->dev) bci_cu.MemFree(c->dev);
    if (c->host) bci_cu.MemFreeHost(c->host);
  }
  free(st->sink.recs);
  free(st->sink.bytes);
  free(st->groups);
  free(st->rec_group);
  free(st->segs);
  free(st->cur_seg);
  free(st->order);
  free(st->spans);
  free(st->spans_tmp);
  free(st->pbuf);
  pthread_mutex_destroy(&st->lock);
  free(st);
  ctx->list = NULL;
}

/* grow *p (of *cap elements of size sz) to hold need */
static bc_status grow(bc_ctx *ctx, void **p, size_t *cap, size_t need, size_t sz) {
  if (need <= *cap) return BC_OK;
  size_t c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *q = realloc(*p, c * sz);
  if (!q) return bci_fail(ctx, BC_ERR_NOMEM, "out of memory growing a list table to %zu entries", c);
  *p = q;
  *cap = c;
  return BC_OK;
}

/* ---- the call's frame: lock, sink, failures naming the tensor ---- */

static bc_status begin(bc_ctx *ctx, const char *fn, int64_t n, const void *array, const char *what) {
  if (n < 0) return bci_fail(ctx, BC_ERR_ARG, "%s: n is %lld; expected the number of tensors (>= 0)", fn, (long long)n);
  if (n > 0 && !array) return bci_fail(ctx, BC_ERR_ARG, "%s: argument '%s' is NULL; expected an array of %lld entries", fn, what, (long long)n);
  if (n > 0x7FFFFFFF) return bci_fail(ctx, BC_ERR_ARG, "%s: n is %lld; a list holds at most 2^31 - 1 tensors", fn, (long long)n);
  pthread_mutex_lock(&ctx->list->lock);
  bci_cu_hold();
  bci_sink *k = &ctx->list->sink;
  k->n = 0;
  k->len = 0;
  ctx->list->nspans = 0;
  return BC_OK;
}

static bc_status end(bc_ctx *ctx, bc_status s) {
  bci_cu_release();
  pthread_mutex_unlock(&ctx->list->lock);
  return s;
}

static void item_begin(bc_ctx *ctx, int64_t i) {
  ctx->list->sink.item = i;
  ctx->list->sink.stage = 0;
}

/* the single call's message, prefixed with the list call and the entry's index */
static bc_status item_fail(bc_ctx *ctx, const char *fn, int64_t i, bc_status s) { return bci_fail_entry(ctx, s, fn, "tensor", i); }

/* ---- outputs that overlap ---- */

static bc_status span_add(bc_ctx *ctx, const void *p, size_t bytes, int64_t item, const char *what) {
  if (!p || bytes == 0) return BC_OK;
  struct bci_list_state *st = ctx->list;
  bc_status s = grow(ctx, (void **)&st->spans, &st->cap_spans, st->nspans + 1, sizeof *st->spans);
  if (s != BC_OK) return s;
  st->spans[st->nspans++] = (bci_span){ (uintptr_t)p, (uintptr_t)p + bytes, item, what };
  return BC_OK;
}

static bc_status spans_check(bc_ctx *ctx, const char *fn) {
  struct bci_list_state *st = ctx->list;
  if (st->nspans < 2) return BC_OK;
  bc_status s = grow(ctx, (void **)&st->spans_tmp, &st->cap_spans_tmp, st->nspans, sizeof *st->spans_tmp);
  if (s != BC_OK) return s;
  size_t i, j;
  if (!bci_spans_overlap(st->spans, st->nspans, st->spans_tmp, &i, &j)) return BC_OK;
  const bci_span *a = &st->spans[i], *b = &st->spans[j];
  return bci_fail(ctx, BC_ERR_ARG, "%s: the outputs overlap: tensor %lld's %s [%p, +%zu) and tensor %lld's %s [%p, +%zu); every "
                  "tensor of a list needs its own output buffers", fn, (long long)a->item, a->what, (void *)a->lo,
                  (size_t)(a->hi - a->lo), (long long)b->item, b->what, (void *)b->lo, (size_t)(b->hi - b->lo));
}

/* the buffers quantize writes into q (amax and scale only where it writes them) */
static bc_status spans_qtensor(bc_ctx *ctx, const char *fn, const bc_qtensor *q, int64_t item, int writes_amax) {
  static const char *const dn[2][2] = { { "rowwise_data", "rowwise_scale_inv" }, { "columnwise_data", "columnwise_scale_inv" } };
  for (int d = 0; d < 2; d++) {
    const void *data = d ? q->columnwise_data : q->rowwise_data;
    if (!data) continue;
    bci_geom g; /* q passed its single call's checks: only the sizes are needed */
    bc_status s = bci_geom_get(ctx, fn, q->format, q->rows, q->cols, d ? BC_COLUMNWISE : BC_ROWWISE, q->scale_swizzled != 0, &g);
    if (s == BC_OK) s = span_add(ctx, data, g.data_bytes, item, dn[d][0]);
    if (s == BC_OK) s = span_add(ctx, d ? q->columnwise_scale_inv : q->rowwise_scale_inv, g.scale_bytes, item, dn[d][1]);
    if (s != BC_OK) return s;
  }
  if (!writes_amax) return BC_OK;
  int tensor = q->format->block == BC_BLOCK_TENSOR;
  bc_status s = BC_OK;
  if (tensor || q->format->rule == BCI_RULE_TWO_LEVEL) s = span_add(ctx, q->amax, 4, item, "amax");
  if (s == BC_OK && tensor) s = span_add(ctx, q->scale, 4, item, "scale");
  return s;
}

/* ---- from records to launches ---- */

static bc_status chunk_get(bc_ctx *ctx, size_t size, chunk **out) {
  struct bci_list_state *st = ctx->list;
  CUcontext cur = NULL;
  BCI_CU(ctx, bci_cu_current(&cur));
  chunk *spare = NULL;
  for (;;) {
    for (int i = 0; i < BCI_LIST_CHUNKS; i++) {
      chunk *c = &st->chunks[i];
      int idle = !c->used || bci_cu.EventQuery(c->done) == CUDA_SUCCESS;
      if (!idle) continue;
      c->used = 0;
      if (c->host && c->cu == cur && c->cap >= size) {
        *out = c;
        return BC_OK;
      }
      if (!spare || (spare->host && !c->host)) spare = c;
    }
    if (spare) break;
    /* every buffer is still being copied: wait for the oldest one (round robin) */
    chunk *c = &st->chunks[st->next_wait++ % BCI_LIST_CHUNKS];
    BCI_CU(ctx, bci_cu.EventSynchronize(c->done));
  }
  if (spare->done) bci_cu.EventDestroy(spare->done);
  if (spare->dev) bci_cu.MemFree(spare->dev);
  if (spare->host) bci_cu.MemFreeHost(spare->host);
  memset(spare, 0, sizeof *spare);
  size_t cap = 65536;
  while (cap < size) cap *= 2;
  CUresult r = bci_cu.MemHostAlloc(&spare->host, cap, CU_MEMHOSTALLOC_PORTABLE);
  if (r == CUDA_SUCCESS) r = bci_cu.MemAlloc(&spare->dev, cap);
  if (r == CUDA_SUCCESS) r = bci_cu.EventCreate(&spare->done, CU_EVENT_DISABLE_TIMING);
  if (r != CUDA_SUCCESS) {
    if (spare->dev) bci_cu.MemFree(spare->dev);
    if (spare->host) bci_cu.MemFreeHost(spare->host);
    memset(spare, 0, sizeof *spare);
    return bci_fail(ctx, r == CUDA_ERROR_OUT_OF_MEMORY ? BC_ERR_NOMEM : BC_ERR_CUDA,
                    "allocating a list buffer of %zu bytes (pinned host and device) failed: %s", cap, bci_cu_error_name(r));
  }
  spare->cap = cap;
  spare->cu = cur;
  *out = spare;
  return BC_OK;
}

static int64_t rec_blocks(const bci_rec *r) { return (int64_t)r->grid[0] * r->grid[1] * r->grid[2]; }

#define ITEM_HEAD 24 /* templates/list.cu: i64 first; u32 gx, gy, gz, pad */

/* A launch's items as kernel parameters, for a list variant with a parameter entry (block
 * quantize: templates/list.cu, X__list_p, struct bc_list_params: u32 np, pad; an array of NP
 * items of `stride` bytes; u32 firsts[NP]; NP = param_cap(stride)). Used for a launch whose items
 * all fit and whose kernel has an item of more than SMALL_ITEM blocks (the gain is per block of a
 * large tensor; a list of small ones keeps the table and its 16 bytes of parameters). */
static size_t param_cap(size_t stride) { return (BCI_LIST_PARAM_BYTES - 8) / (stride + 4); }

static void param_items(unsigned char *pb, const unsigned char *tab, size_t n, size_t stride) {
  const size_t cap = param_cap(stride);
  const uint32_t head[2] = { (uint32_t)n, 0 };
  memcpy(pb, head, 8);
  memcpy(pb + 8, tab, n * stride);
  for (size_t i = 0; i < n; i++) {
    int64_t first;
    memcpy(&first, tab + i * stride, 8);
    const uint32_t f = (uint32_t)first;
    memcpy(pb + 8 + cap * stride + 4 * i, &f, 4);
  }
}

/* whether a launch takes its items as kernel parameters (else from the device table) */
static int param_launch(const group *G, const segment *sg) {
  return G->list->func_p && G->big > SMALL_ITEM && sg->count <= param_cap(G->stride);
}

/* A group whose items do not all fit in the parameters but whose large ones do (bench_list's
 * mix: 16 large tensors and 328 [64, 64] ones in the tile kernel's group) launches its large items
 * through the parameter entry on the caller's stream and the rest through the table on the side
 * stream (two launches of the kernel instead of one, still a number that does not grow with the
 * list). The parameter entry's gain is per block of a large tensor (an NVFP4 cast list of one on
 * an H100: 0.446 -> 0.427 ms); the small items' blocks gain nothing from it. */
static int wants_split(const group *G) {
  return G->list->func_p && G->large > 0 && G->large <= param_cap(G->stride) && G->count > param_cap(G->stride);
}

static bc_status flush(bc_ctx *ctx, const char *fn, void *stream) {
  struct bci_list_state *st = ctx->list;
  bci_sink *sk = &st->sink;
  if (sk->n == 0) return BC_OK;
  bc_status s = grow(ctx, (void **)&st->rec_group, &st->cap_rec_group, sk->n, sizeof *st->rec_group);
  if (s != BC_OK) return s;
  /* groups by (stage, kernel) in order of first appearance */
  st->ngroups = 0;
  size_t last = (size_t)-1;
  for (size_t i = 0; i < sk->n; i++) {
    const bci_rec *r = &sk->recs[i];
    size_t g = last;
    /* the shared memory is part of the key: one item needing more (block quantize of rows that
     * are not 16-byte aligned) must not lower the occupancy of all the others */
    if (g == (size_t)-1 || st->groups[g].k != r->k || st->groups[g].stage != r->stage || st->groups[g].smem != r->smem) {
      for (g = 0; g < st->ngroups; g++)
        if (st->groups[g].k == r->k && st->groups[g].stage == r->stage && st->groups[g].smem == r->smem) break;
      if (g == st->ngroups) {
        s = grow(ctx, (void **)&st->groups, &st->cap_groups, g + 1, sizeof *st->groups);
        if (s != BC_OK) return s;
        st->groups[g] = (group){ .k = r->k, .stage = r->stage, .smem = r->smem, .threads = r->threads, .stride = ITEM_HEAD + r->len };
        st->ngroups++;
      }
    }
    group *G = &st->groups[g];
    if (ITEM_HEAD + r->len != G->stride || r->threads != G->threads)
      return bci_fail(ctx, BC_ERR_INTERNAL, "%s: kernel %s recorded with %zu and %zu bytes of arguments, %u and %u threads", fn,
                      r->k->name, r->len, G->stride - ITEM_HEAD, r->threads, G->threads);
    if (rec_blocks(r) > BCI_MAX_BLOCKS)
      return bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: tensor %lld needs %lld blocks of kernel %s, more than one launch holds", fn,
                      (long long)r->item, (long long)rec_blocks(r), r->k->name);
    G->count++;
    G->blocks += rec_blocks(r);
    G->large += rec_blocks(r) > SMALL_ITEM;
    if (rec_blocks(r) > G->big) G->big = rec_blocks(r);
    st->rec_group[i] = last = g;
  }
  /* launch order: by stage, then first appearance (insertion sort: a handful of groups), and
   * each group's place in the table in that order */
  s = grow(ctx, (void **)&st->order, &st->cap_order, st->ngroups, sizeof *st->order);
  if (s != BC_OK) return s;
  size_t *pm = st->order;
  for (size_t g = 0; g < st->ngroups; g++) {
    size_t j = g;
    while (j > 0 && st->groups[pm[j - 1]].stage > st->groups[g].stage) {
      pm[j] = pm[j - 1];
      j--;
    }
    pm[j] = g;
  }
  size_t total = 0;
  for (size_t j = 0; j < st->ngroups; j++) {
    group *G = &st->groups[pm[j]];
    G->off = total;
    G->fill = 0;
    total += G->count * G->stride;
  }
  /* list kernels first: a failed compile launches nothing */
  for (size_t g = 0; g < st->ngroups && s == BC_OK; g++) {
    char name[160];
    snprintf(name, sizeof name, "%s__list", st->groups[g].k->name);
    s = bci_kernel_get(ctx, name, &st->groups[g].list);
    if (s == BC_OK) st->groups[g].split = wants_split(&st->groups[g]);
  }
  if (s != BC_OK) return s;
  chunk *c = NULL;
  s = chunk_get(ctx, total, &c);
  if (s != BC_OK) return s;
  /* the items, and the launches (segments) with their block counts */
  st->nsegs = 0;
  s = grow(ctx, (void **)&st->cur_seg, &st->cap_cur_seg, st->ngroups, sizeof *st->cur_seg);
  if (s != BC_OK) return s;
  size_t *cur_seg = st->cur_seg;
  for (size_t g = 0; g < st->ngroups; g++) cur_seg[g] = (size_t)-1;
  /* small items first (two passes: up to SMALL_ITEM blocks, then the rest): a launch's first
   * blocks are dispatched first, so the short latency-bound blocks of small tensors run beside
   * the large tensors' bandwidth-bound ones instead of forming the launch's tail (items of a
   * group are independent: any order gives the same bits) */
  for (size_t pass = 0; pass < 2 * sk->n; pass++) {
    const size_t i = pass % sk->n;
    const bci_rec *r = &sk->recs[i];
    if ((rec_blocks(r) <= SMALL_ITEM) != (pass < sk->n)) continue;
    size_t g = st->rec_group[i];
    group *G = &st->groups[g];
    segment *sg = cur_seg[g] == (size_t)-1 ? NULL : &st->segs[cur_seg[g]];
    const int large = G->split && pass >= sk->n; /* a split group's large items start a launch of their own */
    if (!sg || sg->large != large || sg->blocks + rec_blocks(r) > BCI_MAX_BLOCKS || sg->count >= 0x7FFFFFFF) {
      s = grow(ctx, (void **)&st->segs, &st->cap_segs, st->nsegs + 1, sizeof *st->segs);
      if (s != BC_OK) break;
      cur_seg[g] = st->nsegs;
      sg = &st->segs[st->nsegs++];
      *sg = (segment){ g, G->off + G->fill * G->stride, 0, 0, large };
    }
    unsigned char *it = (unsigned char *)c->host + G->off + G->fill * G->stride;
    int64_t first = sg->blocks;
    uint32_t head[4] = { r->grid[0], r->grid[1], r->grid[2], 0 };
    memcpy(it, &first, 8);
    memcpy(it + 8, head, 16);
    memcpy(it + ITEM_HEAD, sk->bytes + r->off, r->len);
    G->fill++;
    sg->count++;
    sg->blocks += rec_blocks(r);
  }
  if (s != BC_OK) return s;
  CUdeviceptr d = c->dev;
  if (s == BC_OK) {
    /* the device table, unless every launch takes its items as parameters (a copy in the
     * stream's order before the launches: bench_shard's interiors, one parameter launch a flush,
     * waited on it) */
    int table = 0;
    for (size_t q = 0; q < st->nsegs && !table; q++) table = !param_launch(&st->groups[st->segs[q].group], &st->segs[q]);
    CUresult r = table ? bci_cu.MemcpyHtoDAsync(d, c->host, total, (CUstream)stream) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS) {
      s = bci_fail(ctx, BC_ERR_CUDA, "%s: copying %zu bytes of item tables failed: %s", fn, total, bci_cu_error_name(r));
    }
    /* stage by stage; a stage of several groups forks its smaller ones onto the side stream
     * (side_ctas above) */
    int sms = 0;
    char arch[16];
    if (st->side_k > 0 && bci_cuda_device(ctx, arch, &sms) != BC_OK) sms = 0;
    for (size_t j = 0; j < st->ngroups && s == BC_OK;) {
      size_t e = j;
      while (e < st->ngroups && st->groups[pm[e]].stage == st->groups[pm[j]].stage) e++;
      size_t big = pm[j];
      for (size_t u = j; u < e; u++)
        if (st->groups[pm[u]].blocks > st->groups[big].blocks) big = pm[u];
      const int fork = sms > 0 && (e - j > 1 || st->groups[big].split) && bci_side_ready(&st->side);
      if (fork) {
        CUresult r = bci_side_fork(&st->side, stream);
        if (r != CUDA_SUCCESS) {
          s = bci_fail(ctx, BC_ERR_CUDA, "%s: ordering the list's side stream after the caller's stream failed: %s", fn,
                       bci_cu_error_name(r));
        }
      }
      /* pass 0: the side stream's launches (the smaller groups, and the small items of the
       * largest group where its large ones have a launch of their own); 1: the rest */
      for (int pass = fork ? 0 : 1; pass < 2 && s == BC_OK; pass++)
        for (size_t u = j; u < e && s == BC_OK; u++) {
          const size_t g = pm[u];
          const group *G = &st->groups[g];
          for (size_t q = 0; q < st->nsegs && s == BC_OK; q++) {
            const segment *sg = &st->segs[q];
            if (sg->group != g || (fork && (g != big || (G->split && !sg->large))) != (pass == 0)) continue;
            void *strm = pass == 0 ? st->side.stream : stream;
            if (param_launch(G, sg)) {
              param_items(st->pbuf, (const unsigned char *)c->host + sg->off, sg->count, G->stride);
              s = bci_kernel_launch_p(ctx, G->list, (unsigned)sg->blocks, G->threads, G->smem, strm, st->pbuf);
              continue;
            }
            CUdeviceptr items = d + sg->off;
            int cnt = (int)sg->count;
            uint32_t tot = (uint32_t)sg->blocks;
            void *params[] = { &items, &cnt, &tot };
            int64_t grid = sg->blocks;
            if (pass == 0 && list_loops(G->k) && grid > (int64_t)st->side_k * sms) grid = (int64_t)st->side_k * sms;
            s = bci_kernel_launch_smem(ctx, G->list, (unsigned)grid, 1, 1, G->threads, G->smem, strm, params);
          }
        }
      if (fork) { /* the caller's stream waits for the side stream (also after a failure) */
        CUresult r = bci_side_join(&st->side, stream);
        if (r != CUDA_SUCCESS) {
          if (s == BC_OK)
            s = bci_fail(ctx, BC_ERR_CUDA, "%s: ordering the caller's stream after the list's side stream failed: %s", fn,
                         bci_cu_error_name(r));
        }
      }
      j = e;
    }
    /* the chunk is free again once the copy and the launches are done (also after a failure) */
    if (bci_cu.EventRecord(c->done, (CUstream)stream) == CUDA_SUCCESS) c->used = 1;
    else bci_cu.StreamSynchronize((CUstream)stream);
  }
  return s;
}

/* ---- the public list calls ---- */

bc_status bc_amax_list(bc_ctx *ctx, int64_t n, const bc_tensor *x, float *amax, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_amax_list";
  if (n > 0 && (!amax || !bci_aligned(amax, 4)))
    return bci_fail(ctx, BC_ERR_ARG, "%s: argument 'amax' is NULL or misaligned; expected a device fp32[%lld]", fn, (long long)n);
  bc_status s = begin(ctx, fn, n, x, "x");
  if (s != BC_OK) return s;
  for (int64_t i = 0; i < n && s == BC_OK; i++) {
    item_begin(ctx, i);
    if (x[i].rows == 0 || x[i].cols == 0) s = bci_zero32(ctx, &ctx->list->sink, amax + i, 1, stream);
    else s = bci_amax(ctx, &ctx->list->sink, &x[i], amax + i, stream);
    if (s != BC_OK) s = item_fail(ctx, fn, i, s);
  }
  if (s == BC_OK) s = flush(ctx, fn, stream);
  return end(ctx, s);
}

bc_status bc_amax_range_list(bc_ctx *ctx, int64_t n, const bc_tensor *x, const int64_t *start, const int64_t *len, float *amax,
                             void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_amax_range_list";
  if (n > 0 && (!amax || !bci_aligned(amax, 4) || !start || !len))
    return bci_fail(ctx, BC_ERR_ARG, "%s: arguments 'start' and 'len' must be int64[%lld] and 'amax' a device fp32[%lld], not NULL", fn,
                    (long long)n, (long long)n);
  bc_status s = begin(ctx, fn, n, x, "x");
  if (s != BC_OK) return s;
  for (int64_t i = 0; i < n && s == BC_OK; i++) {
    item_begin(ctx, i);
    s = bci_amax_range(ctx, &ctx->list->sink, &x[i], start[i], len[i], amax + i, stream);
    if (s != BC_OK) s = item_fail(ctx, fn, i, s);
  }
  if (s == BC_OK) s = flush(ctx, fn, stream);
  return end(ctx, s);
}

bc_status bc_compute_scale_list(bc_ctx *ctx, const bc_format *fmt, int64_t n, const float *amax, float *scale,
                                float *scale_inv, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_compute_scale_list";
  if (n > 0 && (!amax || !scale))
    return bci_fail(ctx, BC_ERR_ARG, "%s: arguments 'amax' and 'scale' must be device fp32[%lld] arrays, not NULL", fn, (long long)n);
  bc_status s = begin(ctx, fn, n, amax, "amax");
  if (s != BC_OK) return s;
  for (int64_t i = 0; i < n && s == BC_OK; i++) {
    item_begin(ctx, i);
    s = bci_compute_scale(ctx, &ctx->list->sink, fmt, amax + i, scale + i, scale_inv ? scale_inv + i : NULL, stream);
    if (s != BC_OK) s = item_fail(ctx, fn, i, s);
  }
  if (s == BC_OK) s = flush(ctx, fn, stream);
  return end(ctx, s);
}

static bc_status quantize_list(bc_ctx *ctx, const char *fn, int cast_only, int64_t n, const bc_tensor *x, bc_qtensor *q,
                               void *stream) {
  if (n > 0 && !q) return bci_fail(ctx, BC_ERR_ARG, "%s: argument 'q' is NULL; expected an array of %lld bc_qtensor", fn, (long long)n);
  bc_status s = begin(ctx, fn, n, x, "x");
  if (s != BC_OK) return s;
  for (int64_t i = 0; i < n && s == BC_OK; i++) {
    item_begin(ctx, i);
    if (x[i].rows == 0 || x[i].cols == 0) {
      if (q[i].rows != x[i].rows || q[i].cols != x[i].cols)
        s = bci_fail(ctx, BC_ERR_ARG, "%s: tensor %lld: q has shape [%lld, %lld] but x has [%lld, %lld]; they must match", fn,
                     (long long)i, (long long)q[i].rows, (long long)q[i].cols, (long long)x[i].rows, (long long)x[i].cols);
      continue; /* an empty tensor: nothing to write */
    }
    s = cast_only ? bci_quantize_cast(ctx, &ctx->list->sink, &x[i], &q[i], stream)
                  : bci_quantize(ctx, &ctx->list->sink, &x[i], &q[i], stream);
    if (s != BC_OK) s = item_fail(ctx, fn, i, s);
    else s = spans_qtensor(ctx, fn, &q[i], i, !cast_only);
  }
  if (s == BC_OK) s = spans_check(ctx, fn);
  if (s == BC_OK) s = flush(ctx, fn, stream);
  return end(ctx, s);
}

bc_status bc_quantize_list(bc_ctx *ctx, int64_t n, const bc_tensor *x, bc_qtensor *q, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  return quantize_list(ctx, "bc_quantize_list", 0, n, x, q, stream);
}

bc_status bc_quantize_cast_list(bc_ctx *ctx, int64_t n, const bc_tensor *x, bc_qtensor *q, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  return quantize_list(ctx, "bc_quantize_cast_list", 1, n, x, q, stream);
}

bc_status bc_dequantize_list(bc_ctx *ctx, int64_t n, const bc_qtensor *q, bc_direction dir, const bc_tensor *out, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_dequantize_list";
  if (n > 0 && !out) return bci_fail(ctx, BC_ERR_ARG, "%s: argument 'out' is NULL; expected an array of %lld bc_tensor", fn, (long long)n);
  bc_status s = begin(ctx, fn, n, q, "q");
  if (s != BC_OK) return s;
  for (int64_t i = 0; i < n && s == BC_OK; i++) {
    item_begin(ctx, i);
    if (q[i].rows == 0 || q[i].cols == 0) continue; /* an empty tensor */
    s = bci_dequantize(ctx, &ctx->list->sink, &q[i], dir, &out[i], stream);
    if (s != BC_OK) {
      s = item_fail(ctx, fn, i, s);
      break;
    }
    int64_t ld = out[i].row_stride ? out[i].row_stride : out[i].cols;
    s = span_add(ctx, out[i].data, (size_t)((out[i].rows - 1) * ld + out[i].cols) * bc_dtype_size(out[i].dtype), i, "out");
  }
  if (s == BC_OK) s = spans_check(ctx, fn);
  if (s == BC_OK) s = flush(ctx, fn, stream);
  return end(ctx, s);
}

bc_status bc_scale_swizzle_list(bc_ctx *ctx, int64_t n, const bc_swizzle_job *jobs, int from_swizzled, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_scale_swizzle_list";
  bc_status s = begin(ctx, fn, n, jobs, "jobs");
  if (s != BC_OK) return s;
  for (int64_t i = 0; i < n && s == BC_OK; i++) {
    const bc_swizzle_job *j = &jobs[i];
    item_begin(ctx, i);
    if (j->rows == 0 || j->cols == 0) continue;
    s = bci_scale_swizzle(ctx, &ctx->list->sink, j->format, j->rows, j->cols, j->dir, j->src, from_swizzled, j->dst, stream);
    if (s != BC_OK) {
      s = item_fail(ctx, fn, i, s);
      break;
    }
    bci_geom g;
    s = bci_geom_get(ctx, fn, j->format, j->rows, j->cols, j->dir, !from_swizzled, &g);
    if (s == BC_OK) s = span_add(ctx, j->dst, g.scale_bytes, i, "dst");
  }
  if (s == BC_OK) s = spans_check(ctx, fn);
  if (s == BC_OK) s = flush(ctx, fn, stream);
  return end(ctx, s);
}

/* ---- grouped: one input split along its rows ---- */

bc_status bc_quantize_grouped(bc_ctx *ctx, const bc_tensor *x, int64_t groups, const int64_t *group_rows, const bc_qtensor *q,
                              void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_quantize_grouped";
  if (!x || !q) return bci_fail(ctx, BC_ERR_ARG, "%s: arguments 'x' and 'q' must not be NULL", fn);
  int64_t ld;
  bc_status s = bci_check_grouped(ctx, fn, x, groups, group_rows, q, &ld);
  if (s != BC_OK) return s;
  s = begin(ctx, fn, groups, group_rows, "group_rows");
  if (s != BC_OK) return s;
  bci_group_cursor cur;
  bci_group_first(&cur);
  for (int64_t g = 0; g < groups && s == BC_OK; g++) {
    item_begin(ctx, g);
    bc_tensor xg;
    bc_qtensor qg;
    s = bci_group_next(ctx, fn, x, ld, group_rows, q, &cur, &xg, &qg);
    if (s == BC_OK && group_rows[g] > 0) s = bci_quantize(ctx, &ctx->list->sink, &xg, &qg, stream);
    if (s != BC_OK) s = bci_fail_entry(ctx, s, fn, "group", g);
  }
  if (s == BC_OK) s = flush(ctx, fn, stream);
  return end(ctx, s);
}

/* ---- for the collectives (comm/) ---- */

bc_status bci_list_amax_back(bc_ctx *ctx, const char *fn, int64_t m, const int64_t *idx, const float *amax, const bc_qtensor *q,
                             void *stream) {
  bc_status s = begin(ctx, fn, m, idx, "idx");
  if (s != BC_OK) return s;
  for (int64_t j = 0; j < m && s == BC_OK; j++) {
    const bc_qtensor *t = &q[idx[j]];
    item_begin(ctx, idx[j]);
    s = bci_copy32(ctx, &ctx->list->sink, amax + j, t->amax, 1, stream);
    if (s == BC_OK && t->format->block == BC_BLOCK_TENSOR)
      s = bci_compute_scale(ctx, &ctx->list->sink, t->format, amax + j, t->scale, NULL, stream);
    if (s != BC_OK) s = item_fail(ctx, fn, idx[j], s);
  }
  if (s == BC_OK) s = flush(ctx, fn, stream);
  return end(ctx, s);
}

/* ---- for the layers above (comm/: the sharded cast) ---- */

bc_status bci_list_begin(bc_ctx *ctx, const char *fn, int64_t n, const void *array, const char *what) {
  return begin(ctx, fn, n, array, what);
}
bci_sink *bci_list_item(bc_ctx *ctx, int64_t i) {
  item_begin(ctx, i);
  return &ctx->list->sink;
}
bc_status bci_list_flush(bc_ctx *ctx, const char *fn, void *stream) { return flush(ctx, fn, stream); }
bc_status bci_list_end(bc_ctx *ctx, bc_status s) { return end(ctx, s); }
