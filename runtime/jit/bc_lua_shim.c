/* jit/bc_lua_shim.c: for the shared library only. Debian's liblua5.4.a is not built with -fPIC and
 * refers to stdin/stdout/stderr with PC-relative relocations, which a shared object cannot
 * resolve against libc. The link maps those three names (--defsym) to these hidden pointers,
 * filled from libc's at load time; blockcast never lets Lua print (no print, no io library). */
#include <dlfcn.h>
#include <stdio.h>

__attribute__((visibility("hidden"))) FILE *bci_lua_stdin_shim, *bci_lua_stdout_shim, *bci_lua_stderr_shim;

__attribute__((constructor)) static void bci_lua_shim_init(void) {
  FILE **i = dlsym(RTLD_DEFAULT, "stdin"), **o = dlsym(RTLD_DEFAULT, "stdout"), **e = dlsym(RTLD_DEFAULT, "stderr");
  bci_lua_stdin_shim = i ? *i : NULL;
  bci_lua_stdout_shim = o ? *o : NULL;
  bci_lua_stderr_shim = e ? *e : NULL;
}
