/* tests/multi.h: one process per GPU for the multi-GPU tier and benchmark. The parent never
 * initializes CUDA (it counts the GPUs in a child), starts this program again once per rank with
 * "--rank R W DIR" (DIR: a fresh directory for id files) and reads each rank's output in turn.
 * NCCL is opened at run time (dlopen), as the library does, so nothing here needs nccl.h. */
#ifndef BC_TEST_MULTI_H
#define BC_TEST_MULTI_H
#include <dlfcn.h>
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
  return n->init && n->allreduce && n->allgather && n->split && n->destroy;
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

/* a rank's main: "--count" prints the number of GPUs (the parent's child for mt_gpu_count);
 * returns -1 for any other command line */
static inline int mt_count_main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--count")) return -1;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  printf("%d\n", n);
  return 0;
}

/* removes the id files the ranks wrote and the directory */
static inline void mt_cleanup(const char *dir) {
  const char *names[] = { "blockcast.id", "own.id" };
  for (int i = 0; i < 2; i++) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, names[i]);
    unlink(p);
  }
  rmdir(dir);
}

/* the number of GPUs, counted by a child process */
static inline int mt_gpu_count(const char *self) {
  int fd[2];
  if (pipe(fd)) return 0;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    char *argv[] = { (char *)self, "--count", NULL };
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  close(fd[1]);
  char buf[32] = { 0 };
  ssize_t k = read(fd[0], buf, sizeof buf - 1);
  close(fd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  return k > 0 ? atoi(buf) : 0;
}

/* starts W ranks ("--rank r W dir"); fds[r] reads rank r's standard output */
static inline int mt_spawn(const char *self, int W, const char *dir, pid_t *pids, int *fds) {
  for (int r = 0; r < W; r++) {
    int fd[2];
    if (pipe(fd)) return 0;
    pids[r] = fork();
    if (pids[r] == 0) {
      dup2(fd[1], 1);
      close(fd[0]);
      char rs[16], ws[16];
      snprintf(rs, sizeof rs, "%d", r);
      snprintf(ws, sizeof ws, "%d", W);
      char *argv[] = { (char *)self, "--rank", rs, ws, (char *)dir, NULL };
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    close(fd[1]);
    fds[r] = fd[0];
  }
  return 1;
}
#endif
