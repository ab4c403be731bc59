#!/usr/bin/env bash
# 12-readme: the C example in README.md compiles against the static and the shared library, and
# runs (on a machine with a GPU) to a clean exit.
B=${BC_BUILD:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
n=0; fail=0
t() { n=$((n+1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fail=1; fi; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if [ ! -f README.md ]; then echo "1..0 # SKIP no README.md here"; exit 0; fi
awk '/<!-- example:begin -->/{on=1; next} /<!-- example:end -->/{on=0} on && !/^```/' README.md > "$tmp/example.c"
t "README has the example" '[ -s "$tmp/example.c" ] && grep -q "bc_quantize" "$tmp/example.c"'
gcc -std=c11 -Wall -Werror -I runtime/include -I "$CUDA_HOME/include" "$tmp/example.c" -o "$tmp/ex_static" \
  "$B/lib/libblockcast.a" "$CUDA_HOME/lib64/libcudart_static.a" -ldl -lm -lpthread -lrt 2> "$tmp/cc.log"; rc=$?
t "it compiles against libblockcast.a" '[ $rc -eq 0 ] || { cat "$tmp/cc.log" | sed "s/^/# /"; false; }'
gcc -std=c11 -Wall -Werror -I runtime/include -I "$CUDA_HOME/include" "$tmp/example.c" -o "$tmp/ex_shared" \
  -L "$B/lib" -l:libblockcast.so "$CUDA_HOME/lib64/libcudart_static.a" -ldl -lm -lpthread -lrt 2> "$tmp/cc2.log"; rc=$?
t "it compiles against libblockcast.so" '[ $rc -eq 0 ] || { cat "$tmp/cc2.log" | sed "s/^/# /"; false; }'
# the README whole (an edit that cut it short once passed every other test): its sections, the
# measured table's rows of every block format in specs/, and every recorded result it names present
miss=0
for h in "## Two commands" "## Usage" "## Python (PyTorch)" "## Formats" "## Kernels at run time" "## Results"; do
  grep -q "^$h" README.md || { echo "# README lacks the section: $h"; miss=1; }
done
for f in specs/*.lua; do
  f=$(basename "$f" .lua)
  case $f in elements|*_tensor) continue ;; esac
  grep -q "^| \`$f\` | quantize rowwise | " README.md || { echo "# README's measured table lacks $f"; miss=1; }
done
t "README keeps its sections and a measured row of every block format" '[ $miss = 0 ]'
grep -o "tests/bench/results/[A-Za-z0-9._/-]*" README.md | sed 's/[.,)]*$//' | sort -u > "$tmp/results"
miss=0
while read -r f; do [ -e "$f" ] || { echo "# README names a missing file: $f"; miss=1; }; done < "$tmp/results"
t "every results file README names exists" '[ -s "$tmp/results" ] && [ $miss = 0 ]'
nm -D --defined-only "$B/lib/libblockcast.so" | awk '{print $3}' > "$tmp/syms"
t "libblockcast.so exports the API and only bc_* symbols" 'grep -qx bc_quantize "$tmp/syms" && [ -z "$(grep -v "^bc_" "$tmp/syms")" ]'

if nvidia-smi -L >/dev/null 2>&1; then
  LD_LIBRARY_PATH="$B/lib" "$tmp/ex_shared" > "$tmp/run.log" 2>&1; rc=$?
  t "it runs on the GPU (shared library)" '[ $rc -eq 0 ] || { sed "s/^/# /" "$tmp/run.log"; false; }'
  "$tmp/ex_static" > "$tmp/run2.log" 2>&1; rc=$?
  t "it runs on the GPU (static library)" '[ $rc -eq 0 ] || { sed "s/^/# /" "$tmp/run2.log"; false; }'
else
  LD_LIBRARY_PATH="$B/lib" "$tmp/ex_shared" > "$tmp/run.log" 2>&1; rc=$?
  t "without a GPU it fails cleanly with a message (exit 1, no crash)" '[ $rc -eq 1 ] && grep -q "BC_ERR_UNAVAILABLE\|no CUDA" "$tmp/run.log"'
fi
echo "1..$n"
exit $fail
