/* 19-comm-nccl: the NCCL transport's host side, no GPU needed: communicator ids and their hex
 * form, the argument checks of bc_comm_create_nccl / bc_comm_bootstrap (made before NCCL is
 * opened or a GPU is asked for), the bootstrap's env and file paths failing with messages that
 * name what was wrong. Passes with or without libnccl.so.2 and a GPU; nothing crashes. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockcast.h"
#include "tap.h"

static bc_ctx *ctx;
#define ERR_HAS(s, want, needle, name)                           \
  do {                                                           \
    bc_status s_ = (s);                                          \
    is_int(s_, want, "%s: status", name);                        \
    is_str_has(bc_last_error(ctx), needle, "%s: message", name); \
  } while (0)

static int is_hex256(const char *s) {
  if (strlen(s) != 256) return 0;
  for (int i = 0; i < 256; i++)
    if (!strchr("0123456789abcdef", s[i])) return 0;
  return 1;
}

int main(void) {
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("Bail out! %s\n", err); return 1; }

  /* ---- ids and hex ---- */
  bc_comm_id id, back;
  for (int i = 0; i < BC_COMM_ID_BYTES; i++) id.bytes[i] = (unsigned char)(i * 37 + 11);
  char hex[2 * BC_COMM_ID_BYTES + 1];
  is_int(bc_comm_id_to_string(ctx, &id, hex), BC_OK, "to_string");
  ok(is_hex256(hex), "to_string writes 256 lowercase hex digits");
  ok(strncmp(hex, "0b30", 4) == 0, "to_string: byte 0 first, high nibble first (%.8s)", hex);
  memset(&back, 0, sizeof back);
  is_int(bc_comm_id_from_string(ctx, hex, &back), BC_OK, "from_string");
  is_bytes(back.bytes, id.bytes, BC_COMM_ID_BYTES, "hex round trip");
  char upper[sizeof hex];
  for (size_t i = 0; i < sizeof hex; i++) upper[i] = (char)(hex[i] >= 'a' && hex[i] <= 'f' ? hex[i] - 32 : hex[i]);
  memset(&back, 0, sizeof back);
  is_int(bc_comm_id_from_string(ctx, upper, &back), BC_OK, "from_string accepts upper case");
  is_bytes(back.bytes, id.bytes, BC_COMM_ID_BYTES, "upper-case round trip");

  ERR_HAS(bc_comm_id_from_string(ctx, "abc", &back), BC_ERR_ARG, "has length 3; expected exactly 256 hex digits", "short hex");
  ERR_HAS(bc_comm_id_from_string(ctx, "", &back), BC_ERR_ARG, "has length 0", "empty hex");
  char bad[300];
  memcpy(bad, hex, sizeof hex);
  bad[17] = 'g';
  ERR_HAS(bc_comm_id_from_string(ctx, bad, &back), BC_ERR_ARG, "character 17 is 'g', not a hex digit", "non-hex char");
  memcpy(bad, hex, sizeof hex);
  bad[256] = '0';
  bad[257] = 0;
  ERR_HAS(bc_comm_id_from_string(ctx, bad, &back), BC_ERR_ARG, "longer than 256 characters", "long hex");
  memcpy(bad, hex, sizeof hex);
  bad[256] = '\n';
  bad[257] = 0;
  ERR_HAS(bc_comm_id_from_string(ctx, bad, &back), BC_ERR_ARG, "character 256 is 0x0a", "trailing newline");
  ERR_HAS(bc_comm_id_from_string(ctx, NULL, &back), BC_ERR_ARG, "'hex' is NULL", "NULL hex");
  ERR_HAS(bc_comm_id_from_string(ctx, hex, NULL), BC_ERR_ARG, "'id' is NULL", "NULL id (from_string)");
  ERR_HAS(bc_comm_id_to_string(ctx, NULL, hex), BC_ERR_ARG, "'id' is NULL", "NULL id (to_string)");
  ERR_HAS(bc_comm_id_to_string(ctx, &id, NULL), BC_ERR_ARG, "'out' is NULL", "NULL out (to_string)");
  ERR_HAS(bc_comm_id_create(ctx, NULL), BC_ERR_ARG, "'id' is NULL", "NULL id (create)");

  /* a fresh id: needs libnccl.so.2 (maybe a GPU); without them a clean failure with a message */
  bc_status s = bc_comm_id_create(ctx, &back);
  ok(s == BC_OK || s == BC_ERR_UNAVAILABLE || s == BC_ERR_NCCL, "bc_comm_id_create: OK or a clean failure (%s)", bc_status_string(s));
  if (s == BC_OK) {
    ok(bc_comm_id_to_string(ctx, &back, hex) == BC_OK && is_hex256(hex), "a fresh id prints as hex");
  } else {
    diag("bc_comm_id_create: %s: %s", bc_status_string(s), bc_last_error(ctx));
    ok(strlen(bc_last_error(ctx)) > 20 && (s != BC_ERR_UNAVAILABLE || strstr(bc_last_error(ctx), "NCCL")),
       "bc_comm_id_create's failure explains itself");
  }

  /* ---- argument checks: before NCCL is opened or a GPU is asked for ---- */
  bc_comm *comm = (bc_comm *)&id; /* must come back NULL */
  ERR_HAS(bc_comm_create_nccl(ctx, &id, 0, 0, &comm), BC_ERR_ARG, "nranks is 0; expected at least 1", "nranks 0");
  ok(comm == NULL, "*out is NULL on failure");
  ERR_HAS(bc_comm_create_nccl(ctx, &id, 4, 4, &comm), BC_ERR_ARG, "rank is 4; expected 0 <= rank < nranks (4)", "rank too big");
  ERR_HAS(bc_comm_create_nccl(ctx, &id, 4, -1, &comm), BC_ERR_ARG, "rank is -1", "negative rank");
  ERR_HAS(bc_comm_create_nccl(ctx, NULL, 2, 0, &comm), BC_ERR_ARG, "'id' is NULL", "NULL id (create_nccl)");
  ERR_HAS(bc_comm_create_nccl(ctx, &id, 2, 0, NULL), BC_ERR_ARG, "'out' is NULL", "NULL out (create_nccl)");
  ERR_HAS(bc_comm_wrap_nccl(ctx, NULL, &comm), BC_ERR_ARG, "'nccl_comm' is NULL", "wrap NULL");
  ERR_HAS(bc_comm_bootstrap(ctx, "env:X", 0, 0, 1.0, &comm), BC_ERR_ARG, "nranks is 0", "bootstrap nranks 0");
  ERR_HAS(bc_comm_bootstrap(ctx, "env:X", 2, 2, 1.0, &comm), BC_ERR_ARG, "rank is 2", "bootstrap rank 2 of 2");
  ERR_HAS(bc_comm_bootstrap(ctx, NULL, 2, 0, 1.0, &comm), BC_ERR_ARG, "'where' is NULL", "bootstrap NULL where");
  ERR_HAS(bc_comm_bootstrap(ctx, "", 2, 0, 1.0, &comm), BC_ERR_ARG, "'where' is empty", "bootstrap empty where");
  ERR_HAS(bc_comm_bootstrap(ctx, "env:", 2, 0, 1.0, &comm), BC_ERR_ARG, "no variable name", "bootstrap env: without a name");
  ERR_HAS(bc_comm_bootstrap(ctx, "/tmp/x", 2, 1, -1.0, &comm), BC_ERR_ARG, "timeout_s is -1", "bootstrap negative timeout");
  ERR_HAS(bc_comm_bootstrap(ctx, "/tmp/x", 2, 1, NAN, &comm), BC_ERR_ARG, "timeout_s is", "bootstrap NaN timeout");
  is_int(bc_comm_id_create(NULL, &id), BC_ERR_ARG, "NULL ctx: id_create");
  is_int(bc_comm_id_to_string(NULL, &id, hex), BC_ERR_ARG, "NULL ctx: to_string");
  is_int(bc_comm_id_from_string(NULL, hex, &id), BC_ERR_ARG, "NULL ctx: from_string");
  is_int(bc_comm_create_nccl(NULL, &id, 1, 0, &comm), BC_ERR_ARG, "NULL ctx: create_nccl");
  is_int(bc_comm_wrap_nccl(NULL, &id, &comm), BC_ERR_ARG, "NULL ctx: wrap_nccl");
  is_int(bc_comm_bootstrap(NULL, "env:X", 1, 0, 1.0, &comm), BC_ERR_ARG, "NULL ctx: bootstrap");

  /* ---- bootstrap through the environment ---- */
  unsetenv("BC_TEST19_NO_SUCH_ID");
  ERR_HAS(bc_comm_bootstrap(ctx, "env:BC_TEST19_NO_SUCH_ID", 2, 1, 1.0, &comm), BC_ERR_ARG,
          "environment variable BC_TEST19_NO_SUCH_ID is not set", "bootstrap: unset variable");
  ok(comm == NULL, "bootstrap: *out is NULL on failure");
  setenv("BC_TEST19_BAD_ID", "0123xyz", 1);
  ERR_HAS(bc_comm_bootstrap(ctx, "env:BC_TEST19_BAD_ID", 2, 1, 1.0, &comm), BC_ERR_ARG,
          "environment variable BC_TEST19_BAD_ID: character 4 is 'x'", "bootstrap: malformed variable");

  /* ---- bootstrap through a file ---- */
  char dir[] = "/tmp/bc19.XXXXXX";
  if (!mkdtemp(dir)) { printf("Bail out! mkdtemp failed\n"); return 1; }
  char path[256];
  snprintf(path, sizeof path, "%s/id", dir);
  ERR_HAS(bc_comm_bootstrap(ctx, path, 2, 1, 0.05, &comm), BC_ERR_UNAVAILABLE, "did not appear within 0.05 s", "bootstrap: no file, timeout");
  is_str_has(bc_last_error(ctx), path, "bootstrap timeout: the message names the path");
  FILE *f = fopen(path, "w");
  fputs("not an id\n", f);
  fclose(f);
  ERR_HAS(bc_comm_bootstrap(ctx, path, 2, 1, 0.02, &comm), BC_ERR_UNAVAILABLE, "is not an id after 0.02 s", "bootstrap: malformed file");
  unlink(path);

  /* rank 0 writes the id, then creating the communicator needs NCCL and a current CUDA context
   * (none here): a clean failure, and the file holds the id when one was made */
  s = bc_comm_bootstrap(ctx, path, 2, 0, 1.0, &comm);
  ok(s != BC_OK && comm == NULL, "bootstrap rank 0 without a CUDA context fails (%s)", bc_status_string(s));
  diag("bootstrap rank 0: %s", bc_last_error(ctx));
  ok(strlen(bc_last_error(ctx)) > 20, "... with a message");
  f = fopen(path, "r");
  if (f) {
    char got[300] = "";
    if (!fgets(got, sizeof got, f)) got[0] = 0;
    fclose(f);
    got[strcspn(got, "\n")] = 0;
    ok(is_hex256(got), "rank 0 wrote the id's hex to the file");
    unlink(path);
  } else {
    ok(s == BC_ERR_UNAVAILABLE || s == BC_ERR_NCCL, "no file: the id could not be made (%s)", bc_status_string(s));
  }
  rmdir(dir);

  bc_ctx_destroy(ctx);
  return done_testing();
}
