/* tests/multi.h: one process per GPU for the multi-GPU tier and benchmark. The parent never
 * initializes CUDA (it counts the GPUs in a child), starts this program again once per rank with
 * "--rank R W DIR" (DIR: a fresh directory for id files and the ranks' logs), waits for every
 * rank (each under a timeout; the others killed once one fails) and then reads their logs in
 * rank order. NCCL is opened at run time (dlopen), as the library does, so nothing here needs
 * nccl.h. */
#ifndef BC_TEST_MULTI_H
#define BC_TEST_MULTI_H
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "blockcast.h"

typedef struct { char internal[128]; } mt_nccl_id;
typedef struct mt_nccl {
  int (*init)(void **comm, int nranks, mt_nccl_id id, int rank);
  int (*allreduce)(const void *s, void *r, size_t n, int dt, int op, void *comm, void *stream);
  int (*allgather)(const void *s, void *r, size_t n, int dt, void *comm, void *stream);
  int (*split)(void *comm, int color, int key, void **out, void *config);
  int (*destroy)(void *comm);
  int (*send)(const void *s, size_t n, int dt, int peer, void *comm, void *stream);
  int (*recv)(void *r, size_t n, int dt, int peer, void *comm, void *stream);
  int (*group_start)(void);
  int (*group_end)(void);
} mt_nccl;
enum { MT_UINT8 = 1, MT_SUM = 0 };

static inline int mt_nccl_open(mt_nccl *n) {
  void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 0;
  *(void **)&n->init = dlsym(lib, "ncclCommInitRank");
  *(void **)&n->allreduce = dlsym(lib, "ncclAllReduce");
  *(void **)&n->allgather = dlsym(lib, "ncclAllGather");
  *(void **)&n->split = dlsym(lib, "ncclCommSplit");
  *(void **)&n->destroy = dlsym(lib, "ncclCommDestroy");
  *(void **)&n->send = dlsym(lib, "ncclSend");
  *(void **)&n->recv = dlsym(lib, "ncclRecv");
  *(void **)&n->group_start = dlsym(lib, "ncclGroupStart");
  *(void **)&n->group_end = dlsym(lib, "ncclGroupEnd");
  return n->init && n->allreduce && n->allgather && n->split && n->destroy && n->send && n->recv && n->group_start &&
         n->group_end;
}

/* an NCCL communicator of all ranks made by the caller from blockcast's id helper: rank 0 writes
 * the id's hex to DIR/name, the others wait for it (up to 120 s) */
static inline void *mt_nccl_comm(bc_ctx *ctx, const mt_nccl *n, const char *dir, const char *name, int rank, int W) {
  char path[600], tmp[640], hex[2 * BC_COMM_ID_BYTES + 2] = { 0 };
  snprintf(path, sizeof path, "%s/%s", dir, name);
  bc_comm_id id;
  if (rank == 0) {
    if (bc_comm_id_create(ctx, &id) != BC_OK) return NULL;
    bc_comm_id_to_string(ctx, &id, hex);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *fp = fopen(tmp, "w");
    if (!fp) return NULL;
    fputs(hex, fp);
    fclose(fp);
    rename(tmp, path);
  } else {
    for (int t = 0; t < 1200; t++) {
      FILE *fp = fopen(path, "r");
      if (fp) {
        size_t got = fread(hex, 1, 2 * BC_COMM_ID_BYTES, fp);
        fclose(fp);
        if (got == 2 * BC_COMM_ID_BYTES) break;
      }
      usleep(100000);
    }
    if (bc_comm_id_from_string(ctx, hex, &id) != BC_OK) return NULL;
  }
  mt_nccl_id nid;
  memcpy(nid.internal, id.bytes, sizeof nid.internal);
  void *comm = NULL;
  return n->init(&comm, W, nid, rank) == 0 ? comm : NULL;
}

/* a rank's main: "--count" prints the number of GPUs (the parent's child for mt_gpu_count): 0
 * when the runtime finds no device or no driver, with the reason as a comment; exit status 1 for
 * any other error. Returns -1 for any other command line. */
static inline int mt_count_main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--count")) return -1;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    printf("0 (%s)\n", cudaGetErrorName(e));
    return 0;
  }
  if (e != cudaSuccess) {
    printf("-1 (cudaGetDeviceCount: %s: %s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
    return 1;
  }
  printf("%d\n", n);
  return 0;
}

/* the number of GPUs, counted by a child process; -1 when counting failed (why: its reason) */
static inline int mt_gpu_count(const char *self, char *why, size_t wl) {
  int fd[2];
  snprintf(why, wl, "could not start the counting process");
  if (pipe(fd)) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]);
    close(fd[1]);
    return -1;
  }
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    char *argv[] = { (char *)self, "--count", NULL };
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  close(fd[1]);
  char buf[256] = { 0 };
  size_t got = 0;
  ssize_t k;
  while (got < sizeof buf - 1 && (k = read(fd[0], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)k;
  close(fd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  buf[strcspn(buf, "\n")] = 0;
  snprintf(why, wl, "%s", got ? buf : "no output");
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || got == 0) return -1;
  return atoi(buf);
}

/* DIR/rank<r>.log: rank r's standard output and error */
static inline void mt_log_path(char *p, size_t n, const char *dir, int r) { snprintf(p, n, "%s/rank%d.log", dir, r); }

/* removes the id files and logs the ranks wrote, and the directory */
static inline void mt_cleanup(const char *dir, int W) {
  const char *names[] = { "blockcast.id", "own.id" };
  char p[600];
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, names[i]);
    unlink(p);
  }
  for (int r = 0; r < W; r++) {
    mt_log_path(p, sizeof p, dir, r);
    unlink(p);
  }
  rmdir(dir);
}

/* Starts W ranks ("--rank r W dir"), each writing its standard output and error to its log file
 * (a pipe read rank after rank could fill and block a rank inside a collective), each killed by
 * SIGALRM after timeout_s seconds (a rank that stops leaves its peers waiting in NCCL, which has
 * no timeout). Returns the number started: fewer than W when a fork failed (the caller kills
 * those with mt_wait). */
static inline int mt_spawn(const char *self, int W, const char *dir, unsigned timeout_s, pid_t *pids) {
  for (int r = 0; r < W; r++) {
    char log[600];
    mt_log_path(log, sizeof log, dir, r);
    fflush(stdout);
    pids[r] = fork();
    if (pids[r] < 0) return r;
    if (pids[r] == 0) {
      FILE *fp = freopen(log, "w", stdout);
      if (!fp) _exit(126);
      dup2(1, 2);
      char rs[16], ws[16];
      snprintf(rs, sizeof rs, "%d", r);
      snprintf(ws, sizeof ws, "%d", W);
      char *argv[] = { (char *)self, "--rank", rs, ws, (char *)dir, NULL };
      alarm(timeout_s); /* a pending alarm survives exec */
      execv("/proc/self/exe", argv);
      _exit(127);
    }
  }
  return W;
}

/* Waits for the n ranks started; once one has failed (non-zero status or a signal), the others
 * get 20 s to finish and are then killed. st[r]: each rank's wait status. Returns the number
 * that failed. */
static inline int mt_wait(int n, const pid_t *pids, int *st) {
  int left = n, failed = 0, done[8] = { 0 };
  double kill_at = -1, t = 0;
  while (left > 0) {
    for (int r = 0; r < n; r++) {
      if (done[r]) continue;
      pid_t w = waitpid(pids[r], &st[r], WNOHANG);
      if (w == 0) continue;
      if (w < 0) st[r] = -1;
      done[r] = 1;
      left--;
      if (w < 0 || !WIFEXITED(st[r]) || WEXITSTATUS(st[r]) != 0) {
        failed++;
        if (kill_at < 0) kill_at = t + 20;
      }
    }
    if (kill_at >= 0 && t >= kill_at)
      for (int r = 0; r < n; r++)
        if (!done[r]) kill(pids[r], SIGKILL);
    if (left > 0) {
      usleep(100000);
      t += 0.1;
    }
  }
  return failed;
}

/* a rank's end, in words: "exited with status 3", "killed by signal 14 (the timeout)" */
static inline const char *mt_status_text(int st, char *buf, size_t n) {
  if (st == -1) snprintf(buf, n, "could not be waited for");
  else if (WIFEXITED(st)) snprintf(buf, n, "exited with status %d", WEXITSTATUS(st));
  else if (WIFSIGNALED(st))
    snprintf(buf, n, "killed by signal %d%s", WTERMSIG(st),
             WTERMSIG(st) == SIGALRM ? " (its timeout)" : WTERMSIG(st) == SIGKILL ? " (after a peer failed)" : "");
  else snprintf(buf, n, "ended with wait status %d", st);
  return buf;
}

/* the seconds a rank may run: $BC_MULTI_TIMEOUT, else def */
static inline unsigned mt_timeout(unsigned def) {
  const char *e = getenv("BC_MULTI_TIMEOUT");
  int v = e ? atoi(e) : 0;
  return v > 0 ? (unsigned)v : def;
}
#endif
