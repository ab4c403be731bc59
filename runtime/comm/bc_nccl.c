/* comm/bc_nccl.c: the NCCL transport. libnccl.so.2 is opened at run time (once per process), so
 * the library loads, and everything but NCCL communicators works, on a machine without it; what
 * needs it then returns BC_ERR_UNAVAILABLE saying what was tried. Also the communicator ids
 * (bc_comm_id: ncclUniqueId, as hex), the bootstrap without MPI, and the NCCL side of the
 * primitives of bc_comm.h. Counting is bc_transport.c's. */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "comm/bc_comm.h"

_Static_assert(sizeof(ncclUniqueId) == BC_COMM_ID_BYTES, "bc_comm_id must hold an ncclUniqueId");

/* ---- libnccl.so.2, opened at run time ---- */

static struct {
  __typeof__(ncclGetVersion) *GetVersion;
  __typeof__(ncclGetUniqueId) *GetUniqueId;
  __typeof__(ncclCommInitRank) *CommInitRank;
  __typeof__(ncclCommDestroy) *CommDestroy;
  __typeof__(ncclCommCount) *CommCount;
  __typeof__(ncclCommUserRank) *CommUserRank;
  __typeof__(ncclAllReduce) *AllReduce;
  __typeof__(ncclAllGather) *AllGather;
  __typeof__(ncclBroadcast) *Broadcast;
  __typeof__(ncclGroupStart) *GroupStart;
  __typeof__(ncclGroupEnd) *GroupEnd;
  __typeof__(ncclGetErrorString) *GetErrorString;
  /* optional: ncclGetLastError (NCCL >= 2.13) adds NCCL's own message to an error; without
   * ncclSend / ncclRecv (NCCL >= 2.7) a gather of unequal pieces broadcasts */
  __typeof__(ncclGetLastError) *GetLastError;
  __typeof__(ncclSend) *Send;
  __typeof__(ncclRecv) *Recv;
} nccl;

static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;
static char nccl_err[2048];
static int nccl_ok;

/* try one path; on failure append it and dlerror's reason to `tried` */
static void *nccl_open(const char *path, char *tried, size_t cap) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror(); /* names the path */
    size_t n = strlen(tried);
    if (why) snprintf(tried + n, cap - n, "%s%s", n ? "; " : "", why);
    else snprintf(tried + n, cap - n, "%s%s: not found", n ? "; " : "", path);
  }
  return h;
}

static void load_nccl(void) {
  char tried[1600] = "";
  void *h = NULL;
  const char *own = getenv("BLOCKCAST_NCCL_LIBRARY");
  if (own && *own) h = nccl_open(own, tried, sizeof tried);
  if (!h) h = nccl_open("libnccl.so.2", tried, sizeof tried);
  const char *dirs[] = { getenv("CUDA_HOME"), "/usr/local/cuda" };
  const char *subs[] = { "lib64", "lib", "targets/x86_64-linux/lib" };
  for (size_t d = 0; d < 2 && !h; d++) {
    if (!dirs[d] || !*dirs[d] || (d == 1 && dirs[0] && strcmp(dirs[0], dirs[1]) == 0)) continue;
    for (size_t s = 0; s < 3 && !h; s++) {
      char p[1024];
      snprintf(p, sizeof p, "%s/%s/libnccl.so.2", dirs[d], subs[s]);
      h = nccl_open(p, tried, sizeof tried);
    }
  }
  if (!h) h = nccl_open("/usr/lib/x86_64-linux-gnu/libnccl.so.2", tried, sizeof tried);
  if (!h) {
    snprintf(nccl_err, sizeof nccl_err,
             "NCCL (libnccl.so.2) could not be opened: %s; install NCCL 2 (e.g. the libnccl2 package or pip's "
             "nvidia-nccl-cu12) or set BLOCKCAST_NCCL_LIBRARY to the library's path; the local transport "
             "(bc_comm_create_local) needs no NCCL",
             tried);
    return;
  }
#define SYM(field, name)                                                                                          \
  do {                                                                                                            \
    void *p_ = dlsym(h, name);                                                                                    \
    if (!p_) {                                                                                                    \
      snprintf(nccl_err, sizeof nccl_err, "the NCCL library that was opened lacks %s, which blockcast calls; install a newer NCCL 2", \
               name);                                                                                             \
      return;                                                                                                     \
    }                                                                                                             \
    memcpy(&nccl.field, &p_, sizeof p_);                                                                          \
  } while (0)
  SYM(GetVersion, "ncclGetVersion");
  SYM(GetUniqueId, "ncclGetUniqueId");
  SYM(CommInitRank, "ncclCommInitRank");
  SYM(CommDestroy, "ncclCommDestroy");
  SYM(CommCount, "ncclCommCount");
  SYM(CommUserRank, "ncclCommUserRank");
  SYM(AllReduce, "ncclAllReduce");
  SYM(AllGather, "ncclAllGather");
  SYM(Broadcast, "ncclBroadcast");
  SYM(GroupStart, "ncclGroupStart");
  SYM(GroupEnd, "ncclGroupEnd");
  SYM(GetErrorString, "ncclGetErrorString");
#undef SYM
  void *le = dlsym(h, "ncclGetLastError");
  if (le) memcpy(&nccl.GetLastError, &le, sizeof le);
  void *p = dlsym(h, "ncclSend"), *q = dlsym(h, "ncclRecv");
  if (p && q) {
    memcpy(&nccl.Send, &p, sizeof p);
    memcpy(&nccl.Recv, &q, sizeof q);
  }
  /* NCCL_VERSION_CODE: major * 1000 + minor * 100 + patch before 2.9, major * 10000 + minor * 100
   * + patch since */
  int v = 0;
  if (nccl.GetVersion(&v) != ncclSuccess || (v >= 10000 ? v / 10000 : v / 1000) < 2) {
    snprintf(nccl_err, sizeof nccl_err, "the NCCL library that was opened reports version code %d; blockcast needs NCCL 2 or newer", v);
    return;
  }
  nccl_ok = 1;
}

static bc_status nccl_load(bc_ctx *ctx) {
  pthread_once(&nccl_once, load_nccl);
  if (!nccl_ok) return bci_fail(ctx, BC_ERR_UNAVAILABLE, "%s", nccl_err);
  return BC_OK;
}

/* A failed NCCL call: BC_ERR_NCCL with the call (its name and what it moved), NCCL's error and its
 * last message. */
static bc_status nccl_fail(bc_ctx *ctx, void *comm, const char *call, ncclResult_t r) {
  const char *what = nccl.GetErrorString ? nccl.GetErrorString(r) : "?";
  const char *last = nccl.GetLastError ? nccl.GetLastError((ncclComm_t)comm) : NULL;
  int more = last && *last;
  return bci_fail(ctx, BC_ERR_NCCL, "%s failed: %s (%d)%s%s", call, what ? what : "?", (int)r, more ? ": " : "",
                  more ? last : "");
}

#define BCI_NCCL(ctx, comm, what, call)                                   \
  do {                                                                    \
    ncclResult_t bci_r_ = (call);                                         \
    if (bci_r_ != ncclSuccess) return nccl_fail((ctx), (comm), (what), bci_r_); \
  } while (0)

/* the GOTO twin: the status into s, then `goto fail`; the call described by a format and its
 * arguments, formatted only when it failed */
#define BCI_NCCL_GOTO(ctx, comm, s, call, ...)                            \
  do {                                                                    \
    ncclResult_t bci_r_ = (call);                                         \
    if (bci_r_ != ncclSuccess) {                                          \
      char bci_w_[128];                                                   \
      snprintf(bci_w_, sizeof bci_w_, __VA_ARGS__);                       \
      (s) = nccl_fail((ctx), (comm), bci_w_, bci_r_);                     \
      goto fail;                                                          \
    }                                                                     \
  } while (0)

/* ---- ids ---- */

bc_status bc_comm_id_create(bc_ctx *ctx, bc_comm_id *id) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!id) return bci_fail(ctx, BC_ERR_ARG, "bc_comm_id_create: 'id' is NULL; expected a bc_comm_id to fill");
  memset(id, 0, sizeof *id);
  bc_status s = nccl_load(ctx);
  if (s != BC_OK) return s;
  ncclUniqueId u;
  BCI_NCCL(ctx, NULL, "bc_comm_id_create: ncclGetUniqueId", nccl.GetUniqueId(&u));
  memcpy(id->bytes, u.internal, BC_COMM_ID_BYTES);
  return BC_OK;
}

static void id_hex(const bc_comm_id *id, char out[2 * BC_COMM_ID_BYTES + 1]) {
  static const char digit[] = "0123456789abcdef";
  for (int i = 0; i < BC_COMM_ID_BYTES; i++) {
    out[2 * i] = digit[id->bytes[i] >> 4];
    out[2 * i + 1] = digit[id->bytes[i] & 15];
  }
  out[2 * BC_COMM_ID_BYTES] = 0;
}

bc_status bc_comm_id_to_string(bc_ctx *ctx, const bc_comm_id *id, char out[2 * BC_COMM_ID_BYTES + 1]) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!id) return bci_fail(ctx, BC_ERR_ARG, "bc_comm_id_to_string: 'id' is NULL; expected a bc_comm_id");
  if (!out)
    return bci_fail(ctx, BC_ERR_ARG, "bc_comm_id_to_string: 'out' is NULL; expected a buffer of %d chars",
                    2 * BC_COMM_ID_BYTES + 1);
  id_hex(id, out);
  return BC_OK;
}

static int hex_value(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* "'x'" for a printable character, else "0xNN" */
static const char *char_desc(int c, char buf[16]) {
  if (c > 32 && c < 127) snprintf(buf, 16, "'%c'", c);
  else snprintf(buf, 16, "0x%02x", (unsigned)(unsigned char)c);
  return buf;
}

/* Parse without touching ctx's message on success; on failure the message starts with `what`
 * (what was parsed: "hex", "$NAME", "file X"). */
static bc_status id_parse(bc_ctx *ctx, const char *fn, const char *what, const char *hex, bc_comm_id *id) {
  const int want = 2 * BC_COMM_ID_BYTES;
  int n = 0;
  while (n <= want && hex[n] && hex_value((unsigned char)hex[n]) >= 0) n++;
  char cd[16];
  if (n < want && hex[n])
    return bci_fail(ctx, BC_ERR_ARG, "%s: %s: character %d is %s, not a hex digit; expected exactly %d hex digits (a bc_comm_id, as bc_comm_id_to_string or `blockcast comm-id` writes it)",
                    fn, what, n, char_desc((unsigned char)hex[n], cd), want);
  if (n < want)
    return bci_fail(ctx, BC_ERR_ARG, "%s: %s has length %d; expected exactly %d hex digits (a bc_comm_id, as bc_comm_id_to_string or `blockcast comm-id` writes it)",
                    fn, what, n, want);
  if (hex[want])
    return bci_fail(ctx, BC_ERR_ARG, "%s: %s is longer than %d characters (character %d is %s); expected exactly %d hex digits",
                    fn, what, want, want, char_desc((unsigned char)hex[want], cd), want);
  for (int i = 0; i < BC_COMM_ID_BYTES; i++)
    id->bytes[i] = (unsigned char)(hex_value((unsigned char)hex[2 * i]) << 4 | hex_value((unsigned char)hex[2 * i + 1]));
  return BC_OK;
}

bc_status bc_comm_id_from_string(bc_ctx *ctx, const char *hex, bc_comm_id *id) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!hex) return bci_fail(ctx, BC_ERR_ARG, "bc_comm_id_from_string: 'hex' is NULL; expected %d hex digits", 2 * BC_COMM_ID_BYTES);
  if (!id) return bci_fail(ctx, BC_ERR_ARG, "bc_comm_id_from_string: 'id' is NULL; expected a bc_comm_id to fill");
  return id_parse(ctx, "bc_comm_id_from_string", "hex", hex, id);
}

/* ---- communicators ---- */

static int comm_check_env(void) {
  const char *e = getenv("BLOCKCAST_COMM_CHECK");
  return e && strcmp(e, "1") == 0;
}

/* BLOCKCAST_GATHER: how the communicator's all-gathers move their pieces (bci_nccl_gatherv) */
static bc_status gather_env(bc_ctx *ctx, const char *fn, int *mode) {
  const char *e = getenv("BLOCKCAST_GATHER");
  *mode = BCI_GATHER_AUTO;
  if (!e || !*e || strcmp(e, "auto") == 0) return BC_OK;
  if (strcmp(e, "collective") == 0) *mode = BCI_GATHER_COLLECTIVE;
  else if (strcmp(e, "sendrecv") == 0) *mode = BCI_GATHER_SENDRECV;
  else
    return bci_fail(ctx, BC_ERR_ARG, "%s: BLOCKCAST_GATHER is '%.64s'; expected auto (the default), collective (ncclAllGather, or a "
                    "broadcast per rank for unequal pieces) or sendrecv (grouped ncclSend / ncclRecv)", fn, e);
  return BC_OK;
}

/* once NCCL is open: the mode asked can be had */
static bc_status gather_mode_ok(bc_ctx *ctx, const char *fn, int mode) {
  if (mode == BCI_GATHER_SENDRECV && !nccl.Send)
    return bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: BLOCKCAST_GATHER is sendrecv but the NCCL library that was opened lacks "
                    "ncclSend / ncclRecv (NCCL 2.7 or newer has them); unset it or install a newer NCCL", fn);
  return BC_OK;
}

static bc_status rank_args(bc_ctx *ctx, const char *fn, int nranks, int rank) {
  if (nranks < 1) return bci_fail(ctx, BC_ERR_ARG, "%s: nranks is %d; expected at least 1", fn, nranks);
  if (rank < 0 || rank >= nranks)
    return bci_fail(ctx, BC_ERR_ARG, "%s: rank is %d; expected 0 <= rank < nranks (%d)", fn, rank, nranks);
  return BC_OK;
}

/* a bc_comm over nc (owned: destroyed with it) */
static void nccl_comm_fill(bc_comm *c, ncclComm_t nc, int rank, int size, int owns, int gather) {
  c->transport = BC_TRANSPORT_NCCL;
  c->rank = rank;
  c->size = size;
  c->nccl = nc;
  c->owns_nccl = owns;
  c->check = comm_check_env();
  c->gather = gather;
  c->one_host = -1;
}

/* what creating a communicator needs, checked before anything is shared with the other ranks:
 * BLOCKCAST_GATHER, NCCL, the gather mode it allows, a current CUDA device */
static bc_status create_checks(bc_ctx *ctx, const char *fn, int *gather) {
  bc_status s = gather_env(ctx, fn, gather);
  if (s == BC_OK) s = nccl_load(ctx);
  if (s == BC_OK) s = gather_mode_ok(ctx, fn, *gather);
  char arch[16];
  if (s == BC_OK) s = bci_cuda_device(ctx, arch, NULL);
  return s;
}

bc_status bc_comm_create_nccl(bc_ctx *ctx, const bc_comm_id *id, int nranks, int rank, bc_comm **out) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!out) return bci_fail(ctx, BC_ERR_ARG, "bc_comm_create_nccl: 'out' is NULL; expected a bc_comm * to fill");
  *out = NULL;
  if (!id) return bci_fail(ctx, BC_ERR_ARG, "bc_comm_create_nccl: 'id' is NULL; expected the bc_comm_id made by one rank (bc_comm_id_create)");
  bc_status s = rank_args(ctx, "bc_comm_create_nccl", nranks, rank);
  if (s != BC_OK) return s;
  int gather;
  if ((s = create_checks(ctx, "bc_comm_create_nccl", &gather)) != BC_OK) return s;
  bc_comm *c = calloc(1, sizeof *c);
  if (!c) return bci_fail(ctx, BC_ERR_NOMEM, "bc_comm_create_nccl: out of host memory");
  ncclUniqueId u;
  memcpy(u.internal, id->bytes, BC_COMM_ID_BYTES);
  ncclComm_t nc = NULL;
  ncclResult_t r = nccl.CommInitRank(&nc, nranks, u, rank);
  if (r != ncclSuccess) {
    free(c);
    return nccl_fail(ctx, NULL, "bc_comm_create_nccl: ncclCommInitRank", r);
  }
  nccl_comm_fill(c, nc, rank, nranks, 1, gather);
  *out = c;
  return BC_OK;
}

bc_status bc_comm_wrap_nccl(bc_ctx *ctx, void *nccl_comm, bc_comm **out) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!out) return bci_fail(ctx, BC_ERR_ARG, "bc_comm_wrap_nccl: 'out' is NULL; expected a bc_comm * to fill");
  *out = NULL;
  if (!nccl_comm) return bci_fail(ctx, BC_ERR_ARG, "bc_comm_wrap_nccl: 'nccl_comm' is NULL; expected an initialized ncclComm_t");
  int gather;
  bc_status s = gather_env(ctx, "bc_comm_wrap_nccl", &gather);
  if (s != BC_OK) return s;
  if ((s = nccl_load(ctx)) != BC_OK) return s;
  if ((s = gather_mode_ok(ctx, "bc_comm_wrap_nccl", gather)) != BC_OK) return s;
  if ((s = bci_cuda_load(ctx)) != BC_OK) return s; /* the primitives use the driver's entry points */
  ncclComm_t nc = (ncclComm_t)nccl_comm;
  int size = 0, rank = 0;
  BCI_NCCL(ctx, nc, "bc_comm_wrap_nccl: ncclCommCount", nccl.CommCount(nc, &size));
  BCI_NCCL(ctx, nc, "bc_comm_wrap_nccl: ncclCommUserRank", nccl.CommUserRank(nc, &rank));
  bc_comm *c = calloc(1, sizeof *c);
  if (!c) return bci_fail(ctx, BC_ERR_NOMEM, "bc_comm_wrap_nccl: out of host memory");
  nccl_comm_fill(c, nc, rank, size, 0, gather);
  *out = c;
  return BC_OK;
}

/* ---- bootstrap ----
 * "env:NAME": every rank reads the id from $NAME. A file path: rank 0 makes an id and writes its
 * hex there (temp file + rename, so a reader never sees a torn file); the others poll every
 * 10 ms until the file holds an id or timeout_s passes. A file left by an earlier run is read as
 * this run's id by any rank that looks before rank 0 replaces it, and those ranks then wait in
 * ncclCommInitRank for a rendezvous that never comes: the launcher must remove the file before
 * starting the ranks (or use a fresh path per run, e.g. one naming the job id). */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* 1: the file holds an id (in *id); 0: not there yet; -1: there but not an id (reason in why) */
static int read_id_file(const char *path, bc_comm_id *id, char *why, size_t why_cap) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (errno == ENOENT) return 0;
    snprintf(why, why_cap, "cannot open it: %s", strerror(errno));
    return -1;
  }
  char buf[2 * BC_COMM_ID_BYTES + 64];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t')) buf[--n] = 0;
  if (n != 2 * BC_COMM_ID_BYTES || strlen(buf) != n) {
    snprintf(why, why_cap, "it holds %zu bytes, not the %d hex digits of an id", n, 2 * BC_COMM_ID_BYTES);
    return -1;
  }
  for (size_t i = 0; i < n; i++)
    if (hex_value((unsigned char)buf[i]) < 0) {
      snprintf(why, why_cap, "byte %zu is not a hex digit", i);
      return -1;
    }
  for (int i = 0; i < BC_COMM_ID_BYTES; i++)
    id->bytes[i] = (unsigned char)(hex_value((unsigned char)buf[2 * i]) << 4 | hex_value((unsigned char)buf[2 * i + 1]));
  return 1;
}

bc_status bc_comm_bootstrap(bc_ctx *ctx, const char *where, int nranks, int rank, double timeout_s, bc_comm **out) {
  static const char *fn = "bc_comm_bootstrap";
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!out) return bci_fail(ctx, BC_ERR_ARG, "%s: 'out' is NULL; expected a bc_comm * to fill", fn);
  *out = NULL;
  if (!where || !*where)
    return bci_fail(ctx, BC_ERR_ARG, "%s: 'where' is %s; expected \"env:NAME\" or a file path", fn, where ? "empty" : "NULL");
  bc_status s = rank_args(ctx, fn, nranks, rank);
  if (s != BC_OK) return s;
  if (!(timeout_s >= 0) || isinf(timeout_s))
    return bci_fail(ctx, BC_ERR_ARG, "%s: timeout_s is %g; expected a finite number of seconds >= 0", fn, timeout_s);
  bc_comm_id id;
  if (strncmp(where, "env:", 4) == 0) {
    const char *name = where + 4;
    if (!*name) return bci_fail(ctx, BC_ERR_ARG, "%s: 'where' is \"env:\" with no variable name; expected \"env:NAME\"", fn);
    const char *hex = getenv(name);
    if (!hex)
      return bci_fail(ctx, BC_ERR_ARG, "%s: environment variable %s is not set; expected the id's %d hex digits in it (e.g. export %s=$(blockcast comm-id) before starting the ranks)",
                      fn, name, 2 * BC_COMM_ID_BYTES, name);
    char what[300];
    snprintf(what, sizeof what, "environment variable %.200s", name);
    if ((s = id_parse(ctx, fn, what, hex, &id)) != BC_OK) return s;
  } else if (rank == 0) {
    /* what creation checks, then the id: a failure of either leaves no file for the others to
     * trust (they time out naming the path instead of waiting in ncclCommInitRank) */
    int gather;
    if ((s = create_checks(ctx, fn, &gather)) != BC_OK) return s;
    if ((s = bc_comm_id_create(ctx, &id)) != BC_OK) return s;
    char hex[2 * BC_COMM_ID_BYTES + 2];
    id_hex(&id, hex);
    hex[2 * BC_COMM_ID_BYTES] = '\n';
    if (bci_write_atomic(where, hex, 2 * BC_COMM_ID_BYTES + 1, NULL, 0) != 0)
      return bci_fail(ctx, BC_ERR_ARG, "%s: cannot write the id to '%s': %s; expected a writable path that every rank can read",
                      fn, where, strerror(errno));
  } else {
    double end = now_s() + timeout_s;
    char why[160] = "";
    for (;;) {
      int got = read_id_file(where, &id, why, sizeof why);
      if (got == 1) break;
      if (now_s() >= end) {
        if (got < 0)
          return bci_fail(ctx, BC_ERR_UNAVAILABLE, "%s: rank %d: '%s' is not an id after %g s (%s); rank 0 writes it (remove a file left by another run before starting the ranks)",
                          fn, rank, where, timeout_s, why);
        return bci_fail(ctx, BC_ERR_UNAVAILABLE, "%s: rank %d: '%s' did not appear within %g s; rank 0 writes it there: start rank 0 with the same path, or give a longer timeout_s",
                        fn, rank, where, timeout_s);
      }
      struct timespec ten_ms = { 0, 10 * 1000 * 1000 };
      nanosleep(&ten_ms, NULL);
    }
  }
  return bc_comm_create_nccl(ctx, &id, nranks, rank, out);
}

/* ---- the primitives ---- */

bc_status bci_nccl_allreduce_max(bc_ctx *ctx, bc_comm *comm, float *buf, int64_t n, void *stream) {
  if (n <= 0) return BC_OK;
  ncclComm_t nc = (ncclComm_t)comm->nccl;
  BCI_NCCL(ctx, nc, "ncclAllReduce (max of fp32 amaxes)", nccl.AllReduce(buf, buf, (size_t)n, ncclFloat32, ncclMax, nc, (cudaStream_t)stream));
  return BC_OK;
}

/* a failed driver call, as BCI_CU words it */
static bc_status cu_fail(bc_ctx *ctx, const char *call, CUresult r) {
  const char *m = "?";
  if (bci_cu.GetErrorString) bci_cu.GetErrorString(r, &m);
  return bci_fail(ctx, BC_ERR_CUDA, "%s failed: %s (%d): %s", call, bci_cu_error_name(r), (int)r, m);
}

#define CU_GOTO(what, call)                              \
  do {                                                   \
    CUresult r_ = (call);                                \
    if (r_ != CUDA_SUCCESS) {                            \
      s = cu_fail(ctx, (what), r_);                      \
      goto fail;                                         \
    }                                                    \
  } while (0)

/* every rank's `bytes` host bytes into all (rank r's at r * bytes), through the device: a small
 * all-gather that synchronizes the stream (the agreement check) */
static bc_status host_allgather(bc_ctx *ctx, bc_comm *comm, const void *mine, size_t bytes, void *all, void *stream) {
  bc_status s = bci_cuda_load(ctx);
  if (s != BC_OK) return s;
  ncclComm_t nc = (ncclComm_t)comm->nccl;
  CUstream st = (CUstream)stream;
  size_t total = (size_t)comm->size * bytes;
  CUdeviceptr d = 0;
  CU_GOTO("the agreement check: cuMemAllocAsync", bci_cu.MemAllocAsync(&d, total, st));
  CUdeviceptr dmine = d + (CUdeviceptr)comm->rank * bytes;
  CU_GOTO("the agreement check: cuMemcpyHtoDAsync", bci_cu.MemcpyHtoDAsync(dmine, mine, bytes, st));
  BCI_NCCL_GOTO(ctx, nc, s, nccl.AllGather((const void *)(uintptr_t)dmine, (void *)(uintptr_t)d, bytes, ncclUint8, nc, (cudaStream_t)st),
                "ncclAllGather of %zu bytes a rank (the agreement check's signatures)", bytes);
  CU_GOTO("the agreement check: cuMemcpyDtoHAsync", bci_cu.MemcpyDtoHAsync(all, d, total, st));
  CU_GOTO("the agreement check: cuStreamSynchronize", bci_cu.StreamSynchronize(st));
  bci_cu.MemFreeAsync(d, st);
  return BC_OK;
fail:
  if (d) bci_cu.MemFreeAsync(d, st);
  return s;
}

/* this host: its boot id (one per running kernel, shared by its containers), else its name */
static uint64_t host_key(void) {
  char buf[256] = "";
  size_t n = 0;
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
  }
  buf[n] = 0;
  if (n == 0 && gethostname(buf, sizeof buf - 1) != 0) buf[0] = 0;
  uint64_t h = 1469598103934665603ull;
  for (const char *c = buf; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
  return h;
}

/* comm->one_host, asked once (a rank alone is on one host): one all-reduce MAX of (key, ~key)
 * gives (max key, ~min key), equal to this rank's (key, ~key) only when every rank has its key.
 * Nothing is allocated, so a rank cannot fail where the others go on into the question and wait
 * for it there: the two words go through `scratch`, 16 bytes of device memory that the gather
 * overwrites next (another rank's piece of this rank's receive buffer). The answer waits for the
 * stream once; a stream being captured into a CUDA graph cannot wait, so a capture made before
 * any such gather ran outside one takes *known = 0 (the caller then uses ncclAllGather), the same
 * on every rank as long as every rank captures the same calls. */
static bc_status ask_one_host(bc_ctx *ctx, bc_comm *comm, void *scratch, void *stream, int *known) {
  *known = 1;
  if (comm->one_host >= 0) return BC_OK;
  if (comm->size == 1) {
    comm->one_host = 1;
    return BC_OK;
  }
  CUstream st = (CUstream)stream;
  CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
  if (bci_cu.StreamIsCapturing(st, &cap) == CUDA_SUCCESS && cap != CU_STREAM_CAPTURE_STATUS_NONE) {
    *known = 0;
    return BC_OK;
  }
  static const char *q = "asking whether every rank is on this host (BLOCKCAST_GATHER=auto)";
  ncclComm_t nc = (ncclComm_t)comm->nccl;
  const uint64_t key = host_key();
  uint64_t v[2] = { key, ~key };
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)scratch;
  CUresult r = bci_cu.MemcpyHtoDAsync(d, v, sizeof v, st);
  if (r != CUDA_SUCCESS) return bci_fail(ctx, BC_ERR_CUDA, "%s: cuMemcpyHtoDAsync failed: %s (%d)", q, bci_cu_error_name(r), (int)r);
  ncclResult_t nr = nccl.AllReduce(scratch, scratch, 2, ncclUint64, ncclMax, nc, (cudaStream_t)stream);
  if (nr != ncclSuccess) {
    char call[160];
    snprintf(call, sizeof call, "%s: ncclAllReduce", q);
    return nccl_fail(ctx, nc, call, nr);
  }
  r = bci_cu.MemcpyDtoHAsync(v, d, sizeof v, st);
  if (r == CUDA_SUCCESS) r = bci_cu.StreamSynchronize(st);
  if (r != CUDA_SUCCESS)
    return bci_fail(ctx, BC_ERR_CUDA, "%s: reading the answer back (cuMemcpyDtoHAsync, cuStreamSynchronize) failed: %s (%d)", q,
                    bci_cu_error_name(r), (int)r);
  comm->one_host = v[0] == key && v[1] == ~key;
  return BC_OK;
}

/* How the pieces of an all-gather travel. Equal pieces laid back to back can go as one
 * ncclAllGather (a ring on NVLink); any pieces can go as grouped ncclSend / ncclRecv, each rank
 * sending its piece straight into its place on every other rank; without ncclSend (NCCL < 2.7),
 * a broadcast per rank. Measured on one host of 4 and of 2 H200s (NVSwitch; bench_multi, tests/
 * bench/results/2026-11-27-gather-sendrecv.md): raw, send / receive moved 32 to 512 MiB a rank
 * 2-5% faster than ncclAllGather on 4 GPUs (8 MiB: the same) and 6-23% faster on 2 (8 to 512
 * MiB); inside bc_all_gather on 4 GPUs it won with 128 MiB pieces (FP8 from 256 MiB of bf16:
 * 1.43-1.45 ms against 1.47-1.48) but lost with 32 MiB ones (0.45 against 0.43); a group that
 * mixed the two (a large piece sent, its small block scales gathered) was slower than either.
 * On 2 H200s a group of several pieces is another matter: its pieces to the one peer go one
 * after the other as send / receive, while ncclAllGathers in one group share the channels; NVFP4
 * gathered in place (16 MiB of data and 2 MiB of block scales a rank) took 0.099-0.102 ms as
 * send / receive and 0.091-0.094 as two ncclAllGathers (one piece of their 18 MiB: 0.088), MXFP8
 * (32 MiB and 1 MiB) 0.147-0.154 against 0.158-0.160, and with 64 MiB pieces or more send /
 * receive won by 10-50 us (2026-11-29-h200x2-gather-pieces.md). With 24 MiB pieces the two
 * ncclAllGathers still won by 5-7 us in place on another such host, while on a third send /
 * receive won at 16 and 24 MiB by 1-13 us (2026-11-29-h200x2-gather-hosts.md): the rule keeps
 * what four of the five 2-GPU machines measured favour. So auto sends the whole group by send /
 * receive when one of its pieces is at least sendrecv_min() bytes (2 ranks: 8 MiB alone, 32 MiB
 * among several; 64 MiB on more; 8 ranks not measured) and every rank is on this host (asked once
 * per communicator, in the first such gather: a 16-byte all-reduce that synchronizes the stream;
 * ask_one_host), or when its pieces are unequal (W broadcasts of a piece each cross every link W
 * times, a gather's W - 1); else by ncclAllGather. A rank's own piece not already in place is,
 * on 1 or 2 ranks, a send to itself in the same group (NCCL copies it beside the exchange;
 * measured: a copy of it on the call's stream before the group cost one more copy's time, 2
 * H200s, call 42 of 2026-11-27-gather-sendrecv.md); on more ranks a copy on the call's stream
 * before the group (gather_group: the send to itself made the exchange erratic on 4 H200s, 128
 * MiB pieces of fp8_e4m3_tensor 1.22-1.29 ms in some runs and 1.37-1.41 in others, of mxfp8
 * 1.33-1.34 and 1.42-1.47, with the side stream or without, where in place every run was steady;
 * 2026-11-29-h200x2-gather-pieces.md).
 * That decision is the rank's own (no peer sees how its own piece lands), so ranks may differ in
 * it. BLOCKCAST_GATHER=collective / sendrecv at the communicator's creation sets one way for all. */
static size_t sendrecv_min(const bc_comm *comm, int pieces) {
  if (comm->size != 2) return (size_t)64 << 20;
  return (size_t)(pieces > 1 ? 32 : 8) << 20;
}

static int gather_uniform(const bc_comm *comm, const bci_gather_job *j) {
  size_t L = j->len[0];
  if (L == 0) return 0;
  for (int r = 1; r < comm->size; r++)
    if (j->len[r] != L || j->off[r] != j->off[0] + (size_t)r * L) return 0;
  return 1;
}

/* the group's way: 1 send / receive, 0 per job (ncclAllGather for equal pieces, else broadcasts) */
static bc_status group_sendrecv(bc_ctx *ctx, bc_comm *comm, int njobs, const bci_gather_job *jobs, void *stream, int *sr) {
  *sr = comm->gather == BCI_GATHER_SENDRECV; /* gather_mode_ok checked that NCCL has it */
  if (comm->gather != BCI_GATHER_AUTO || !nccl.Send) return BC_OK;
  const bci_gather_job *large = NULL;
  int pieces = 0;
  for (int i = 0; i < njobs; i++) {
    const bci_gather_job *j = &jobs[i];
    int any = 0;
    for (int r = 0; r < comm->size && !any; r++) any = j->len[r] > 0;
    if (!any) continue;
    if (!gather_uniform(comm, j)) {
      *sr = 1;
      return BC_OK;
    }
    pieces++;
    if (!large || j->len[0] > large->len[0]) large = j;
  }
  if (!large || large->len[0] < sendrecv_min(comm, pieces)) return BC_OK;
  /* the same question on every rank (the pieces agree), asked in another rank's piece */
  int known;
  void *scratch = (unsigned char *)large->recv + large->off[(comm->rank + 1) % comm->size];
  bc_status s = ask_one_host(ctx, comm, scratch, stream, &known);
  *sr = s == BC_OK && known && comm->one_host == 1;
  return s;
}

/* the group: each job as one ncclAllGather (equal pieces, !sr), as send / receive to every rank
 * (sr) or as a broadcast per rank */
static bc_status gather_group(bc_ctx *ctx, bc_comm *comm, int njobs, const bci_gather_job *jobs, int sr, cudaStream_t st) {
  ncclComm_t nc = (ncclComm_t)comm->nccl;
  const int me = comm->rank;
  bc_status s = BC_OK;
  /* more than 2 ranks: the own pieces not in place copied before the group, not sent to itself;
   * a copy that fails is reported after the group, which the peers wait for, as the first error */
  const int copy_own = sr && comm->size > 2;
  char own[256] = "";
  for (int i = 0; i < njobs && copy_own && !own[0]; i++) {
    const bci_gather_job *j = &jobs[i];
    unsigned char *mine = (unsigned char *)j->recv + j->off[me];
    if (!j->len[me] || j->send == (const void *)mine) continue;
    CUresult r = bci_cu.MemcpyAsync((CUdeviceptr)(uintptr_t)mine, (CUdeviceptr)(uintptr_t)j->send, j->len[me], (CUstream)st);
    if (r != CUDA_SUCCESS)
      snprintf(own, sizeof own, "the all-gather: copying the rank's own piece of %zu bytes into place (cuMemcpyAsync) failed: %s (%d)",
               j->len[me], bci_cu_error_name(r), (int)r);
  }
  ncclResult_t nr = nccl.GroupStart();
  if (nr != ncclSuccess) return own[0] ? bci_fail(ctx, BC_ERR_CUDA, "%s", own) : nccl_fail(ctx, nc, "ncclGroupStart", nr);
  for (int i = 0; i < njobs; i++) {
    const bci_gather_job *j = &jobs[i];
    unsigned char *recv = j->recv;
    if (!sr && gather_uniform(comm, j)) {
      BCI_NCCL_GOTO(ctx, nc, s, nccl.AllGather(j->send, recv + j->off[0], j->len[0], ncclUint8, nc, st), "ncclAllGather of %zu bytes a rank",
                    j->len[0]);
      continue;
    }
    for (int r = 0; r < comm->size; r++) {
      if (sr) {
        /* to and from rank r, in the same order on every rank (NCCL keeps the order per peer);
         * the own piece, unless in place or copied above, as a send to itself (NCCL copies it in
         * the group's kernel, beside the exchange) */
        if (r == me && (copy_own || j->send == (const void *)(recv + j->off[me]))) continue;
        if (j->len[me])
          BCI_NCCL_GOTO(ctx, nc, s, nccl.Send(j->send, j->len[me], ncclUint8, r, nc, st), "ncclSend of %zu bytes to rank %d", j->len[me], r);
        if (j->len[r])
          BCI_NCCL_GOTO(ctx, nc, s, nccl.Recv(recv + j->off[r], j->len[r], ncclUint8, r, nc, st), "ncclRecv of %zu bytes from rank %d",
                        j->len[r], r);
        continue;
      }
      if (!j->len[r]) continue;
      /* the send buffer is read on the root only; the others pass their own receive piece */
      const void *send = r == me ? j->send : recv + j->off[r];
      BCI_NCCL_GOTO(ctx, nc, s, nccl.Broadcast(send, recv + j->off[r], j->len[r], ncclUint8, r, nc, st), "ncclBroadcast of %zu bytes from rank %d",
                    j->len[r], r);
    }
  }
  nr = nccl.GroupEnd();
  if (own[0]) return bci_fail(ctx, BC_ERR_CUDA, "%s", own);
  return nr == ncclSuccess ? BC_OK : nccl_fail(ctx, nc, "ncclGroupEnd (the exchange)", nr);
fail:
  nccl.GroupEnd(); /* a group must be closed even when a call in it failed; the first error is reported */
  return own[0] ? bci_fail(ctx, BC_ERR_CUDA, "%s", own) : s;
}

bc_status bci_nccl_gatherv(bc_ctx *ctx, bc_comm *comm, int njobs, const bci_gather_job *jobs, void *stream) {
  int any = 0;
  for (int i = 0; i < njobs && !any; i++)
    for (int r = 0; r < comm->size && !any; r++) any = jobs[i].len[r] > 0;
  if (!any) return BC_OK;
  int sr = 0;
  bc_status s = group_sendrecv(ctx, comm, njobs, jobs, stream, &sr);
  if (s != BC_OK) return s;
  return gather_group(ctx, comm, njobs, jobs, sr, (cudaStream_t)stream);
}

bc_status bci_nccl_check(bc_ctx *ctx, bc_comm *comm, const char *fn, const char *sig, void *stream) {
  size_t total = (size_t)comm->size * BCI_COMM_SIG;
  /* zero-padded: every rank sends BCI_COMM_SIG bytes; the gather mode first (BLOCKCAST_GATHER must
   * be the same on every rank) */
  char mine[BCI_COMM_SIG] = { 0 };
  static const char *modes[] = { "auto", "collective", "sendrecv" };
  int g = comm->gather >= 0 && comm->gather < 3 ? comm->gather : 0;
  snprintf(mine, BCI_COMM_SIG, "[BLOCKCAST_GATHER=%s] %s", modes[g], sig);
  char *all = malloc(total);
  if (!all) return bci_fail(ctx, BC_ERR_NOMEM, "%s: out of host memory for the agreement check (%zu bytes)", fn, total);
  bc_status s = host_allgather(ctx, comm, mine, BCI_COMM_SIG, all, stream);
  for (int q = 0; q < comm->size && s == BC_OK; q++) {
    char *other = all + (size_t)q * BCI_COMM_SIG;
    other[BCI_COMM_SIG - 1] = 0;
    if (strcmp(other, mine) != 0) {
      s = bci_fail(ctx, BC_ERR_ARG, "%s: rank %d called with %s but rank %d with %s; every rank must make the same call with agreeing arguments",
                   fn, comm->rank, mine, q, other);
      break;
    }
  }
  free(all);
  return s;
}
#undef CU_GOTO

void bci_nccl_destroy(bc_comm *comm) {
  if (!comm || !comm->nccl) return;
  if (comm->owns_nccl && nccl.CommDestroy) nccl.CommDestroy((ncclComm_t)comm->nccl);
  comm->nccl = NULL;
}
