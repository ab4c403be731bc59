/* jit/bc_nvrtc.c: compile generated CUDA C with NVRTC: a cubin for the device's exact arch, or PTX
 * for the newest arch NVRTC knows when the device is newer than NVRTC. Generated sources
 * include no headers (they are self-contained), so there is no include prelude to precompile.
 * A failed compile returns BC_ERR_NVRTC with the log, the options, numbered source lines around
 * each error, and the path of a dump of the full source. bci_kernel_image puts the disk cache
 * (bc_cache.c) in front of NVRTC. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jit/bc_jit.h"

#define NOPTS BCI_NVRTC_NOPTS

/* The NVRTC options of every compile (and of the cache key); returns how many. NVRTC is loaded
 * by the caller. --minimal (NVRTC 12.4+) leaves out the texture, device-runtime and driver-type
 * declarations the generated sources never use: ~5 ms of every compile (H200 host, 2026-11-23).
 * --Ofast-compile is passed where NVRTC has it (12.8+). */
int bci_nvrtc_options(const char *target, char archopt[64], const char *opts[BCI_NVRTC_NOPTS]) {
  int major = 0, minor = 0, n = 0;
  if (bci_nvrtc.Version) bci_nvrtc.Version(&major, &minor);
  int v = major * 100 + minor;
  snprintf(archopt, 64, "--gpu-architecture=%s", target);
  opts[n++] = archopt;
  opts[n++] = "--std=c++17";
  opts[n++] = "--fmad=false";
  opts[n++] = "--no-cache";
  if (v >= 1204) opts[n++] = "--minimal";
  if (v >= 1208) opts[n++] = bci_fast_compile_option();
  return n;
}

void bci_join_options(const char *const *opts, int n, char *buf, size_t size) {
  if (size) buf[0] = 0;
  for (int i = 0; i < n; i++) {
    size_t m = strlen(buf);
    snprintf(buf + m, size - m, "%s%s", i ? " " : "", opts[i]);
  }
}

/* NVRTC's --Ofast-compile level: "0" (full optimization) unless $BLOCKCAST_FAST_COMPILE names
 * another (min, mid, max), an experiment knob: it is part of the cache key, and AOT kernels are
 * bypassed while it is set. */
const char *bci_fast_compile_option(void) {
  const char *e = getenv("BLOCKCAST_FAST_COMPILE");
  if (e && strcmp(e, "min") == 0) return "--Ofast-compile=min";
  if (e && strcmp(e, "mid") == 0) return "--Ofast-compile=mid";
  if (e && strcmp(e, "max") == 0) return "--Ofast-compile=max";
  return "--Ofast-compile=0";
}

bc_status bci_nvrtc_fingerprint(bc_ctx *ctx, char *out, size_t n) {
  bc_status s = bci_nvrtc_load(ctx);
  if (s != BC_OK) return s;
  int major = 0, minor = 0, na = 0;
  bci_nvrtc.Version(&major, &minor);
  snprintf(out, n, "nvrtc %d.%d archs", major, minor);
  if (bci_nvrtc.GetNumSupportedArchs(&na) == NVRTC_SUCCESS && na > 0 && na < 256) {
    int archs[256];
    if (bci_nvrtc.GetSupportedArchs(archs) == NVRTC_SUCCESS)
      for (int i = 0; i < na; i++) {
        size_t l = strlen(out);
        snprintf(out + l, n - l, " %d", archs[i]);
      }
  }
  return BC_OK;
}

bc_status bci_jit_target(bc_ctx *ctx, const char *device_arch, char target[24]) {
  bc_status s = bci_nvrtc_load(ctx);
  if (s != BC_OK) return s;
  int sm = atoi(device_arch + 3), na = 0, best = 0;
  int archs[256];
  if (bci_nvrtc.GetNumSupportedArchs(&na) != NVRTC_SUCCESS || na <= 0 || na > 256 ||
      bci_nvrtc.GetSupportedArchs(archs) != NVRTC_SUCCESS)
    return bci_fail(ctx, BC_ERR_NVRTC, "NVRTC could not list the architectures it supports");
  for (int i = 0; i < na; i++) {
    if (archs[i] == sm) {
      snprintf(target, 24, "%s", device_arch);
      return BC_OK;
    }
    if (archs[i] > best) best = archs[i];
  }
  if (sm > best) { /* a device newer than NVRTC: PTX for the newest arch it knows; the driver compiles it */
    snprintf(target, 24, "compute_%d", best);
    return BC_OK;
  }
  return bci_fail(ctx, BC_ERR_UNSUPPORTED, "NVRTC cannot compile for %s (it supports sm_%d .. sm_%d)", device_arch,
                  archs[0], best);
}

bc_status bci_nvrtc_version(bc_ctx *ctx, int *major, int *minor) {
  bc_status s = bci_nvrtc_load(ctx);
  if (s != BC_OK) return s;
  nvrtcResult r = bci_nvrtc.Version(major, minor);
  if (r != NVRTC_SUCCESS) return bci_fail(ctx, BC_ERR_NVRTC, "nvrtcVersion failed: %s", bci_nvrtc.GetErrorString(r));
  return BC_OK;
}

/* Write the full source where the user can read it; returns the path or "" */
static void dump_source(const char *name, const char *arch, const char *src, char *path, size_t pathsz) {
  const char *dir = getenv("BLOCKCAST_DUMP_DIR");
  char d[512];
  if (!dir || !*dir) {
    const char *tmp = getenv("TMPDIR");
    snprintf(d, sizeof d, "%s/blockcast-dump", tmp && *tmp ? tmp : "/tmp");
    dir = d;
  }
  bci_mkdir_p(dir);
  snprintf(path, pathsz, "%s/%s.%s.cu", dir, name, arch);
  if (bci_write_atomic(path, src, strlen(src), NULL, 0) != 0) path[0] = 0;
}

/* Append the generated-source lines around `file(line)` from an NVRTC log line. */
static void excerpt(const char *src, const char *file, long line, char *out, size_t outsz) {
  /* find `#line 1 "file"` in the source; the template's line N is N lines after it */
  char marker[300];
  snprintf(marker, sizeof marker, "#line 1 \"%s\"", file);
  const char *m = strstr(src, marker);
  long start_line = 1; /* 1-based line of the marker */
  if (m) {
    for (const char *p = src; p < m; p++)
      if (*p == '\n') start_line++;
  } else {
    start_line = 0; /* unknown file: treat as raw source lines */
  }
  long target = start_line + line; /* generated-source line */
  long lo = target - 3, hi = target + 3;
  long cur = 1;
  const char *p = src;
  size_t n = strlen(out);
  snprintf(out + n, outsz - n, "  %s:%ld:\n", file, line);
  while (*p && cur <= hi) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (cur >= lo) {
      n = strlen(out);
      snprintf(out + n, outsz - n, "  %s%5ld | %.*s\n", cur == target ? ">" : " ", cur - start_line, (int)len, p);
    }
    if (!e) break;
    p = e + 1;
    cur++;
  }
}

bc_status bci_nvrtc_compile(bc_ctx *ctx, const char *name, const char *src, const char *arch, void **out,
                            size_t *out_len) {
  bc_status s = bci_nvrtc_load(ctx);
  if (s != BC_OK) return s;
  char archopt[64];
  const char *opts[NOPTS];
  int nopts = bci_nvrtc_options(arch, archopt, opts);
  nvrtcProgram prog;
  char fname[200];
  snprintf(fname, sizeof fname, "%s.cu", name);
  nvrtcResult r = bci_nvrtc.CreateProgram(&prog, src, fname, 0, NULL, NULL);
  if (r != NVRTC_SUCCESS) return bci_fail(ctx, BC_ERR_NVRTC, "nvrtcCreateProgram(%s) failed: %s", name, bci_nvrtc.GetErrorString(r));
  ctx->stats.nvrtc_compiles++;
  r = bci_nvrtc.CompileProgram(prog, nopts, opts);
  if (r != NVRTC_SUCCESS) {
    size_t ln = 0;
    bci_nvrtc.GetProgramLogSize(prog, &ln);
    char *log = malloc(ln + 1);
    if (log) {
      log[0] = 0;
      bci_nvrtc.GetProgramLog(prog, log);
      log[ln] = 0;
    }
    char dump[700];
    dump_source(name, arch, src, dump, sizeof dump);
    char ex[4096] = "";
    /* each "file(line): error" in the log */
    for (const char *p = log ? log : ""; *p;) {
      const char *e = strchr(p, '\n');
      size_t len = e ? (size_t)(e - p) : strlen(p);
      /* "file(line): error: ..." or "file(line): catastrophic error: ..." */
      const char *par = memchr(p, '(', len);
      const char *close = par ? memchr(par, ')', len - (size_t)(par - p)) : NULL;
      int is_error = 0;
      if (close && close + 2 < p + len && close[1] == ':') {
        const char *h = close + 2;
        while (h < p + len && *h == ' ') h++;
        char head[64];
        size_t hl = (size_t)(p + len - h) < sizeof head - 1 ? (size_t)(p + len - h) : sizeof head - 1;
        memcpy(head, h, hl);
        head[hl] = 0;
        is_error = strncmp(head, "error", 5) == 0 || strncmp(head, "catastrophic error", 18) == 0;
      }
      if (is_error) {
        char file[256];
        size_t fl = (size_t)(par - p) < sizeof file - 1 ? (size_t)(par - p) : sizeof file - 1;
        memcpy(file, p, fl);
        file[fl] = 0;
        long line = strtol(par + 1, NULL, 10);
        if (strlen(ex) < sizeof ex - 512) excerpt(src, file, line, ex, sizeof ex);
      }
      if (!e) break;
      p = e + 1;
    }
    char optstr[256];
    bci_join_options(opts, nopts, optstr, sizeof optstr);
    s = bci_fail(ctx, BC_ERR_NVRTC, "NVRTC failed to compile %s for %s (%s)\noptions: %s\nlog:\n%s\nsource:\n%sfull source: %s",
                 name, arch, bci_nvrtc.GetErrorString(r), optstr, log ? log : "(no log)", ex,
                 dump[0] ? dump : "(could not be written)");
    free(log);
    bci_nvrtc.DestroyProgram(&prog);
    return s;
  }
  const int ptx = strncmp(arch, "compute_", 8) == 0;
  size_t n = 0;
  r = ptx ? bci_nvrtc.GetPTXSize(prog, &n) : bci_nvrtc.GetCUBINSize(prog, &n);
  if (r != NVRTC_SUCCESS || n == 0) {
    bci_nvrtc.DestroyProgram(&prog);
    return bci_fail(ctx, BC_ERR_NVRTC, "NVRTC produced no %s for %s (%s): is %s a real architecture?", ptx ? "PTX" : "cubin",
                    name, arch, arch);
  }
  char *bin = malloc(n);
  if (!bin) {
    bci_nvrtc.DestroyProgram(&prog);
    return bci_fail(ctx, BC_ERR_NOMEM, "out of memory");
  }
  r = ptx ? bci_nvrtc.GetPTX(prog, bin) : bci_nvrtc.GetCUBIN(prog, bin);
  bci_nvrtc.DestroyProgram(&prog);
  if (r != NVRTC_SUCCESS) {
    free(bin);
    return bci_fail(ctx, BC_ERR_NVRTC, "nvrtcGetCUBIN(%s) failed: %s", name, bci_nvrtc.GetErrorString(r));
  }
  *out = bin;
  *out_len = n;
  return BC_OK;
}

/* ctx->lock held */
bc_status bci_kernel_image(bc_ctx *ctx, const char *name, const char *target, void **image, size_t *len,
                           bci_launch *launch) {
  char fp[1024];
  bc_status s = bci_nvrtc_fingerprint(ctx, fp, sizeof fp);
  if (s != BC_OK) return s;
  /* the generator knows sm archs; a compute_XX target generates the sm_XX source */
  char garch[24];
  if (strncmp(target, "compute_", 8) == 0) snprintf(garch, sizeof garch, "sm_%s", target + 8);
  else snprintf(garch, sizeof garch, "%s", target);
  char *src;
  size_t srclen;
  s = bci_lua_generate(ctx, name, garch, &src, &srclen);
  if (s != BC_OK) return s;
  if (launch) {
    s = bci_lua_launch(ctx, name, garch, launch);
    if (s != BC_OK) {
      free(src);
      return s;
    }
  }
  char archopt[64], key[65];
  const char *opts[NOPTS];
  int nopts = bci_nvrtc_options(target, archopt, opts);
  bci_cache_key(src, srclen, opts, nopts, fp, key);
  if (bci_cache_read(ctx, key, image, len)) {
    ctx->stats.cache_hits++;
    free(src);
    return BC_OK;
  }
  ctx->stats.cache_misses++;
  s = bci_nvrtc_compile(ctx, name, src, target, image, len);
  free(src);
  if (s != BC_OK) return s;
  bci_cache_write(ctx, key, *image, *len);
  return BC_OK;
}
