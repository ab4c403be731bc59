#!/usr/bin/env bash
# 03-cli: the blockcast CLI (list, gen, compile, cache, tune's planning and errors) and the build's incrementality.
B=${BC_BUILD:-build}
BIN=$B/bin/blockcast
n=0; fail=0
t() { n=$((n+1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fail=1; fi; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

$BIN list > "$tmp/list" 2>&1; rc=$?
t "list runs" '[ $rc -eq 0 ]'
t "list shows both formats" 'grep -q "^format fp8_e4m3_tensor" "$tmp/list" && grep -q "^format fp8_e5m2_tensor" "$tmp/list"'
t "list: every kernel is built ahead of time for sm_90 and sm_100a" '[ "$(grep -c "aot: sm_90 sm_100a" "$tmp/list")" -eq "$(grep -c "^  bc_" "$tmp/list")" ]'
t "list: 39 kernels per per-tensor format (20 and the list variants of 19)" '[ "$(grep -c "(39 kernels)" "$tmp/list")" -eq 2 ]'
$BIN gen --out "$tmp/gen" 2> "$tmp/gen.log"
t "gen writes every kernel for sm_90 and sm_100a" '[ "$(ls "$tmp/gen/sm_90" | wc -l)" -eq "$(ls "$tmp/gen/sm_100a" | wc -l)" ] && [ "$(ls "$tmp/gen/sm_90" | wc -l)" -ge 31 ]'
$BIN gen --out "$tmp/gen" 2> "$tmp/gen2.log"
t "a second gen changes nothing" 'grep -q "(0 changed)" "$tmp/gen2.log"'
printf 'name = "x"\nbogus = 1\n' > "$tmp/bad.lua"
$BIN gen --out "$tmp/g2" --spec "$tmp/bad.lua" 2> "$tmp/bad.log"; rc=$?
t "gen with a bad spec fails with its error" '[ $rc -ne 0 ] && grep -q "BC_ERR_SPEC: $tmp/bad.lua:2: unknown field '"'"'bogus'"'"'" "$tmp/bad.log"'
$BIN tune --help > "$tmp/th.log"; rc=$?
t "tune --help documents the tuner (its options, what it writes)" '[ $rc -eq 0 ] && grep -q "usage: blockcast tune" "$tmp/th.log" && grep -q -- "--min-gain PCT" "$tmp/th.log" && grep -q "gen/tuning/<arch>.lua" "$tmp/th.log"'
$BIN tune --list --format mxfp4 --family quantize --dtype bf16 --dir row > "$tmp/tl.log" 2>&1; rc=$?
nc=$(sed -n 's/^1 kernels, \([0-9]*\) candidates$/\1/p' "$tmp/tl.log")
t "tune --list plans without a GPU: the incumbent first, then the candidates" '[ $rc -eq 0 ] && [ "${nc:-0}" -ge 8 ] && grep -Eq "^bc_quantize_mxfp4__bf16__row \(incumbent: (kernels\.bc_quantize_mxfp4__bf16__row|quantize_block_4bit_row)\), $nc candidates" "$tmp/tl.log" && grep -q "^  \* { threads = 256, tile_rows = " "$tmp/tl.log" && [ "$(grep -c "^  { threads = " "$tmp/tl.log")" -eq $((nc - 1)) ]'
$BIN tune --list --dtype bf17 2> "$tmp/tb.log"; rc=$?
t "tune: a bad option says what is expected (exit 2)" '[ $rc -eq 2 ] && grep -q "dtype bf17: expected bf16, fp16 or fp32" "$tmp/tb.log"'
$BIN tune --list --min-gain nan 2> "$tmp/tg1.log"; rc1=$?; $BIN tune --list --size 16k 2> "$tmp/tg2.log"; rc2=$?
t "tune: a number option that is not a number is refused (nan, 16k)" '[ $rc1 -eq 2 ] && [ $rc2 -eq 2 ] && grep -q "min-gain nan: expected a percentage" "$tmp/tg1.log" && grep -q "size 16k: expected a whole number" "$tmp/tg2.log"'
$BIN tune --list --shape 8192x2048 --kernel bc_quantize_mxfp4__fp32__rowcol > "$tmp/ts0.log" 2>&1; rc0=$?
$BIN tune --list --shape 8192 2> "$tmp/ts1.log"; rc1=$?; $BIN tune --list --shape 0x64 2> "$tmp/ts2.log"; rc2=$?
$BIN tune --list --shape 65536x65536 2> "$tmp/ts3.log"; rc3=$?; $BIN tune --list --size 8192 --shape 8192x2048 2> "$tmp/ts4.log"; rc4=$?
t "tune --shape RxC: taken, and a malformed, empty, too large or doubled timed shape is refused with what is expected" '[ $rc0 -eq 0 ] && grep -q "^bc_quantize_mxfp4__fp32__rowcol (incumbent" "$tmp/ts0.log" && [ $rc1 -eq 2 ] && grep -q "shape 8192: expected R x C, written RxC" "$tmp/ts1.log" && [ $rc2 -eq 2 ] && grep -q "shape 0x64: expected rows and columns 1 .. 1048576 each" "$tmp/ts2.log" && [ $rc3 -eq 2 ] && grep -q "at most 2^30 elements" "$tmp/ts3.log" && [ $rc4 -eq 2 ] && grep -q "size and --shape both given" "$tmp/ts4.log"'
$BIN tune --list --kernel bc_nope 2> "$tmp/tk.log"; rc=$?
t "tune: an unknown --kernel is named" '[ $rc -ne 0 ] && grep -q "kernel bc_nope: no such kernel for sm_90" "$tmp/tk.log"'
$BIN tune --list --kernel bc_quantize_mxfp4__bf16__row__list 2> "$tmp/tn.log"; rc=$?
t "tune: a kernel without a tuning space is refused with why" '[ $rc -eq 2 ] && grep -q "not tunable (blockcast tune sweeps single quantize, dequantize and amax kernels; a list variant takes its kernel" "$tmp/tn.log"'
if ! command -v nvidia-smi >/dev/null 2>&1; then
  $BIN tune --dry-run 2> "$tmp/tg.log"; rc=$?
  t "tune without a GPU fails clearly" '[ $rc -eq 1 ] && grep -q "blockcast tune: needs a CUDA device" "$tmp/tg.log"'
else
  echo "ok $((n=n+1)) - # SKIP a GPU is present (tune runs on the GPU tier)"
fi
$BIN gen --out "$tmp/ga" --arch 2> "$tmp/na.log"; rc1=$?; $BIN list --help > "$tmp/lh.log"; rc2=$?; $BIN tune --list --f 2> "$tmp/tf.log"; rc3=$?
t "an option without its value is named; --help per command; tune's --f is not --format" '[ $rc1 -eq 2 ] && grep -q "blockcast gen: option --arch needs a value" "$tmp/na.log" && [ $rc2 -eq 0 ] && grep -q "usage: blockcast" "$tmp/lh.log" && [ $rc3 -eq 2 ] && grep -q "unknown argument '"'"'--f'"'"'" "$tmp/tf.log"'
$BIN frobnicate 2> "$tmp/u.log"; rc=$?
t "an unknown command prints usage and exits 2" '[ $rc -eq 2 ] && grep -q "usage: blockcast" "$tmp/u.log"'
export BLOCKCAST_CACHE_DIR="$tmp/cache"
$BIN compile --format fp8_e5m2_tensor --arch sm_90 2> "$tmp/c1.log"; rc=$?
t "compile --format fills the cache without a GPU" '[ $rc -eq 0 ] && grep -q "39 kernels in the cache $tmp/cache: 39 compiled, 0 already there" "$tmp/c1.log"'
$BIN compile --format fp8_e5m2_tensor --arch sm_90 2> "$tmp/c2.log"
t "a second compile finds them all" 'grep -q "0 compiled, 39 already there" "$tmp/c2.log"'
t "cache ls counts them" '$BIN cache ls | grep -q ": 39 kernels"'
f=$(ls "$tmp"/cache/*/*.bck | head -1); printf 'X' | dd of="$f" bs=1 seek=300 conv=notrunc 2>/dev/null
g=$(ls "$tmp"/cache/*/*.bck | tail -1); touch -d '2001-01-01' "$g"
k=$(basename "$g"); mkdir -p "$tmp/cache/zz" "$tmp/cache/js"; cp "$g" "$tmp/cache/zz/$k"   # an entry in another key's folder
mkfifo "$tmp/cache/${k:0:2}/$(printf 'b%.0s' $(seq 64)).bck" 2>/dev/null                   # a FIFO named like an entry
echo keep > "$tmp/cache/js/user.tmp"; echo keep > "$tmp/cache/js/notes.bck"                    # files of someone else
timeout 20 $BIN cache verify > "$tmp/v.log"; rc=$?
t "cache verify finds and removes a corrupt entry (exit 1), without waiting on a FIFO" '[ $rc -eq 1 ] && grep -q "38 good, 1 bad" "$tmp/v.log"'
t "cache verify leaves the entries' ages alone (least recently used order)" '[ "$(stat -c %Y "$g")" = "$(date -d 2001-01-01 +%s)" ]'
t "cache verify counts only entries in their key's folder" '[ -f "$tmp/cache/zz/$k" ] && ! grep -q "zz/$k" "$tmp/v.log"'
BLOCKCAST_CACHE_MAX_MB=2G $BIN cache ls > "$tmp/l.log" 2> "$tmp/l.err"
t "cache ls: a cap that is not a whole number of MiB is named, the default used" 'grep -q "BLOCKCAST_CACHE_MAX_MB is '"'"'2G'"'"'; expected a whole number of MiB" "$tmp/l.err" && grep -q "(cap 1024 MiB" "$tmp/l.log"'
BLOCKCAST_SPEC_PATH="$tmp/bad.lua" $BIN cache clear > /dev/null
t "cache clear empties it (whatever BLOCKCAST_SPEC_PATH holds: a bad spec there does not stop it)" '$BIN cache ls | grep -q ": 0 kernels"'
t "cache clear leaves files that are not the cache's" '[ -f "$tmp/cache/js/user.tmp" ] && [ -f "$tmp/cache/js/notes.bck" ]'
BLOCKCAST_CACHE_DIR="$tmp/$(printf 'd%.0s' $(seq 950))" $BIN cache ls > /dev/null 2> "$tmp/long.log"; rc=$?
t "a cache directory path too long is refused, with the limit" '[ $rc -ne 0 ] && grep -q "BC_ERR_ARG: the cache directory from \$BLOCKCAST_CACHE_DIR is [0-9]* bytes long; at most 899 fit" "$tmp/long.log"'
$BIN gen --out "$tmp/$(printf 'o%.0s' $(seq 1100))" 2> "$tmp/glong.log"; rc=$?
t "gen: an --out too long is refused, not cut short" '[ $rc -eq 2 ] && grep -q "blockcast gen: --out is [0-9]* bytes long; at most" "$tmp/glong.log"'
$BIN compile --format nope 2> "$tmp/c3.log"; rc=$?
t "compile of an unknown format fails with the known ones" '[ $rc -ne 0 ] && grep -q "known formats: fp8_block_128x128, fp8_block_1x128, fp8_e4m3_tensor" "$tmp/c3.log"'
unset BLOCKCAST_CACHE_DIR
if command -v make >/dev/null && [ -f runtime/build.mk ]; then
  make --no-print-directory -q -f runtime/build.mk B="$B" all; rc=$?
  t "the build is up to date: a second ./build.sh generates and compiles nothing" '[ $rc -eq 0 ]'
else
  n=$((n+1)); echo "ok $n - # SKIP no source tree here"
fi
echo "1..$n"
exit $fail
