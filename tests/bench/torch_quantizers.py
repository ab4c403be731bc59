"""Plain-PyTorch baselines of blockcast's quantizers, bit-exact with blockcast (benchmark baselines).

Written the way a user would write them: vectorized torch ops only (no loops over elements or
blocks, no custom kernels), no data-dependent Python control flow and no .item(), so that
`torch.compile(fn, fullgraph=True)` compiles them. Shape-dependent branches (padding of ragged
shapes) are fine for the compiler: shapes are static or guarded.

    QUANTIZERS[(format_name, direction)](x) -> tuple of tensors
    OUTPUT_FIELDS[(format_name, direction)] -> names of the tuple's entries

direction: "rowwise", "columnwise" or "both"; x: a 2D fp32 / bf16 / fp16 tensor [M, K] on any device.
Outputs are raw bytes in blockcast's stored layout (DESIGN.md "Quantized tensor layouts"), padding
written as zeros: data as uint8 codes (4-bit: two per byte, element 2j in the low nibble), fp32
scale_inv as float32, e8m0 / ue4m3 scales as uint8 codes; amax and scale as float32[1].
Tuple order (entries of an absent direction omitted):
  fp8_e4m3_tensor, fp8_e5m2_tensor (current scaling):
      rowwise_data [M,K], rowwise_scale_inv f32[1], columnwise_data [K,M], columnwise_scale_inv f32[1],
      amax f32[1], scale f32[1]
  fp8_block_1x128:   rowwise_data [M,K], rowwise_scale_inv f32[ceil(K/128), roundup(M,4)],
                     columnwise_data [K,M], columnwise_scale_inv f32[ceil(M/128), roundup(K,4)]
  fp8_block_128x128: rowwise_data [M,K], rowwise_scale_inv f32[ceil(M/128), roundup(ceil(K/128),4)],
                     columnwise_data [K,M], columnwise_scale_inv f32[ceil(K/128), roundup(ceil(M/128),4)]
  mxfp8_e4m3, mxfp8_e5m2: rowwise_data [M,K], rowwise_scale_inv u8[roundup(M,128), roundup(ceil(K/32),4)],
                     columnwise_data [M,K] (not transposed),
                     columnwise_scale_inv u8[roundup(ceil(M/32),4), roundup(K,128)]
  mxfp4:             rowwise_data u8[M,K/2], rowwise_scale_inv u8[roundup(M,128), roundup(ceil(K/32),4)],
                     columnwise_data u8[K,M/2] (transposed),
                     columnwise_scale_inv u8[roundup(K,128), roundup(ceil(M/32),4)]
  nvfp4, nvfp4_2d:   rowwise_data u8[M,K/2], rowwise_scale_inv u8[roundup(M,128), roundup(ceil(K/16),4)],
                     columnwise_data u8[K,M/2], columnwise_scale_inv u8[roundup(K,128), roundup(ceil(M/16),4)],
                     amax f32[1] (global amax). nvfp4_2d: one scale per 16x16 tile, repeated over its 16 rows.
Ragged M, K are supported (zero padding to whole blocks, then crop); 4-bit formats need K even
(rowwise) and M even (columnwise), as in blockcast. Stochastic rounding and RHT are not covered.

Numerics (DESIGN.md "Numerics", runtime/ref/bc_ref*.c):
- Every fp32 step is the same IEEE op in the same order as the C reference. Divisions go through
  fp64 and are rounded back to fp32 (_div): fp64 carries more than 2*24+2 bits, so this is the
  correctly rounded fp32 quotient on every backend, including Triton, whose fp32 `/` is the
  approximate div.full unless TORCHINDUCTOR_EMULATE_DIVISION_ROUNDING=1 (with a plain fp32 `/`,
  compiled fp8_e4m3_tensor and nvfp4 missed bits on about a third of random inputs on an H200).
  No step is a mul followed by an add, so FMA contraction (on in Triton) cannot change bits.
- fp32 -> fp8 with torch's cast (round to nearest even) after a clamp to +-max (the cast does not
  saturate); e2m1 as the count of midpoint thresholds below |v| (ties to the even code): one
  torch.bucketize in eager, 7 fused compares under torch.compile; power-of-2 scales and e8m0
  codes through int32 bit views.
- NaN/Inf inputs are not handled as blockcast does (torch's amax propagates NaN; blockcast ignores it).

Compile with torch.compile(fn, fullgraph=True, dynamic=False); each key has its own code object, so
dynamo's recompile limit (8 shapes/dtypes) counts per key. Checked bit-exact against blockcast.ref
on an H200 (eager and Triton-compiled, bf16/fp32/fp16, aligned and ragged shapes) and on the CPU
(eager; compiled on aligned shapes: see selfcheck for the CPU backend's ragged-shape bug).
"""
import struct
import types

import torch
import torch.nn.functional as F

FLT_MAX = 3.4028234663852886e38


def _f32(v):
    """The fp32 nearest to v, as a Python float (exact when used as an fp32 scalar operand)."""
    return struct.unpack("f", struct.pack("f", v))[0]


# Input dtype's largest finite value: an Inf block scale of the FP8 block formats becomes it.
_DTYPE_MAX = {torch.float32: FLT_MAX, torch.bfloat16: struct.unpack("f", struct.pack("I", 0x7F7F0000))[0],
              torch.float16: 65504.0}
_ELEM = {"e4m3": (torch.float8_e4m3fn, 448.0), "e5m2": (torch.float8_e5m2, 57344.0)}

# e2m1: |v| -> code 0..7 (values 0, .5, 1, 1.5, 2, 3, 4, 6) is the number of thresholds below |v|.
# Midpoints 0.25, 1.25, 2.5, 5 tie to the lower (even) code: threshold t, "v > t". Midpoints 0.75,
# 1.75, 3.5 tie to the upper (even) code: "v >= t" = "v > prev_float(t)" (as bucketize takes them).
_E2M1_T = [0.25, 0.75 - 2.0 ** -24, 1.25, 1.75 - 2.0 ** -23, 2.5, 3.5 - 2.0 ** -22, 5.0]  # exact fp32 values
_E2M1_CMP = [(0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False), (3.5, True), (5.0, False)]
_E2M1_BOUNDS = {}
_INV6 = _f32(1.0 / 6.0)  # 1.0f / 6.0f


def _cdiv(a, b):
    return -(-a // b)


def _rup(a, b):
    return _cdiv(a, b) * b


def _div(a, b):
    """IEEE fp32 a / b (correctly rounded) on any backend: the fp64 quotient rounded to fp32."""
    a = a.double() if isinstance(a, torch.Tensor) else float(a)
    return (a / b.double()).float()


def _pad(t, rows, cols):
    """t padded with zeros at the end to [rows, cols], contiguous (no copy when it already is)."""
    r, c = t.shape
    return t.contiguous() if (r, c) == (rows, cols) else F.pad(t, (0, cols - c, 0, rows - r))


def _fp8(v, elem):
    """fp32 -> fp8 codes (uint8), round to nearest even, saturating."""
    dt, fmax = _ELEM[elem]
    return v.clamp(-fmax, fmax).to(dt).view(torch.uint8)


def _e2m1(v):
    """fp32 -> e2m1 codes (uint8, 0..15), round to nearest even, saturating; sign in bit 3."""
    a = v.abs()
    if torch.compiler.is_compiling():  # fused into one kernel: 7 compares beat a binary search
        code = sum((a >= t if ge else a > t).to(torch.int32) for t, ge in _E2M1_CMP)
    else:  # eager: one kernel instead of 20
        b = _E2M1_BOUNDS.get(v.device)
        if b is None:  # one small tensor per device, made once (no host->device copy per call)
            b = _E2M1_BOUNDS[v.device] = torch.tensor(_E2M1_T, dtype=torch.float32, device=v.device)
        code = torch.bucketize(a, b, out_int32=True)
    return (code + torch.signbit(v).to(torch.int32) * 8).to(torch.uint8)


def _e2m1_packed(v, dim):
    """fp32 -> e2m1 codes packed in pairs along dim (element 2j in the low nibble): the even and
    odd elements are encoded apart, so no unpacked code tensor is made (and the compiler fuses)."""
    ev, od = [slice(None)] * v.dim(), [slice(None)] * v.dim()
    ev[dim], od[dim] = slice(0, None, 2), slice(1, None, 2)
    return _e2m1(v[tuple(ev)]) | (_e2m1(v[tuple(od)]) << 4)


def _amax_scale(amax, fmax, inf_value, pow2):
    """scale_from_amax with eps 0 (amax: fp32 tensor): returns (scale, scale_inv)."""
    s = _div(fmax, amax)
    s = torch.where(torch.isinf(s), inf_value, s)
    if pow2:  # keep sign + exponent bits: 2^floor(log2 s)
        s = (s.view(torch.int32) & -0x800000).view(torch.float32)  # -0x800000 = 0xFF800000
    s = torch.where((amax == 0) | torch.isinf(amax), 1.0, s)
    return s, _div(1.0, s)


def _e8m0_rceil(amax, inv_fmax):
    """MX RCEIL: (e8m0 code as int32, encode factor 2^(127-e) as fp32) from a block amax;
    inv_fmax = _f32(1 / elem_max), the fp32 reciprocal constant."""
    v = amax * inv_fmax
    b = v.view(torch.int32)
    ex, man = b >> 23, b & 0x7FFFFF
    # smallest e with 2^(e-127) >= v: normals E + (mantissa != 0); fp32 denormals 1 if v > 2^-127
    e = torch.where(ex == 0, (man > 0x400000).to(torch.int32), ex + (man != 0).to(torch.int32))
    e = e.clamp(max=254)
    fbits = torch.where(e == 254, 0x400000, (254 - e) << 23)  # e = 254 -> the denormal 2^-127
    return e, fbits.view(torch.float32)


# ---------------------------------------------------------------------------------------------
# FP8 per tensor (current scaling)


def _fp8_tensor(elem, row, col):
    fmax = _ELEM[elem][1]

    def q(x):
        x = x.contiguous()  # no-op for the usual contiguous input
        amax = x.abs().amax().float().reshape(1)
        s, si = _amax_scale(amax, fmax, FLT_MAX, False)
        d = _fp8(x * s, elem)  # s is fp32[1] (not 0-dim), so x * s is computed in fp32
        out = []
        if row:
            out += [d, si]
        if col:
            out += [d.t().contiguous(), si]
        return tuple(out + [amax, s])

    return q


# ---------------------------------------------------------------------------------------------
# FP8 blocks 1x128 (128x1 columnwise) and 128x128, fp32 power-of-2 scales


def _fp8_block_1d(row, col):
    def q(x):
        x = x.contiguous()  # no-op for the usual contiguous input
        M, K = x.shape
        fmax, infv = 448.0, _DTYPE_MAX[x.dtype]
        xp = _pad(x, _rup(M, 128) if col else M, _rup(K, 128) if row else K)
        Mp, Kp = xp.shape
        a = xp.abs()  # once for both directions
        out = []
        if row:
            xb = xp.view(Mp, Kp // 128, 128)
            s, si = _amax_scale(a.view(Mp, Kp // 128, 128).amax(-1).float(), fmax, infv, True)  # [Mp, K/128]
            d = _fp8(xb * s[:, :, None], "e4m3").view(Mp, Kp)[:M, :K]
            out += [d.contiguous(), _pad(si[:M].t(), Kp // 128, _rup(M, 4))]
        if col:
            xb = xp.view(Mp // 128, 128, Kp)
            s, si = _amax_scale(a.view(Mp // 128, 128, Kp).amax(1).float(), fmax, infv, True)  # [M/128, Kp]
            d = _fp8(xb * s[:, None, :], "e4m3").view(Mp, Kp)[:M, :K]
            out += [d.t().contiguous(), _pad(si[:, :K], Mp // 128, _rup(K, 4))]
        return tuple(out)

    return q


def _fp8_block_2d(row, col):
    def q(x):
        x = x.contiguous()  # no-op for the usual contiguous input
        M, K = x.shape
        xp = _pad(x, _rup(M, 128), _rup(K, 128))
        Mp, Kp = xp.shape
        mb, kb = Mp // 128, Kp // 128
        xb = xp.view(mb, 128, kb, 128)
        s, si = _amax_scale(xb.abs().amax((1, 3)).float(), 448.0, _DTYPE_MAX[x.dtype], True)  # [mb, kb]
        d = _fp8(xb * s[:, None, :, None], "e4m3").view(Mp, Kp)[:M, :K]
        out = []
        if row:
            out += [d.contiguous(), _pad(si, mb, _rup(kb, 4))]
        if col:  # one scale per block: the columnwise copy is the transpose
            out += [d.t().contiguous(), _pad(si.t(), kb, _rup(mb, 4))]
        return tuple(out)

    return q


# ---------------------------------------------------------------------------------------------
# MX: 32-element blocks, e8m0 scales (RCEIL). MXFP8 columnwise data is not transposed; MXFP4's is.


def _mx(elem, row, col):
    fp4 = elem == "e2m1"
    inv = _f32(1.0 / (6.0 if fp4 else _ELEM[elem][1]))  # made here: struct is not traced by dynamo

    def q(x):
        x = x.contiguous()  # no-op for the usual contiguous input
        M, K = x.shape
        xp = _pad(x, _rup(M, 32) if col else M, _rup(K, 32) if row else K)
        Mp, Kp = xp.shape
        a = xp.abs()  # once for both directions
        out = []
        if row:
            xb = xp.view(Mp, Kp // 32, 32)
            e, f = _e8m0_rceil(a.view(Mp, Kp // 32, 32).amax(-1).float(), inv)  # [Mp, K/32]
            v = xb * f[:, :, None]
            d = _e2m1_packed(v, -1).view(Mp, Kp // 2)[:M, :K // 2] if fp4 else _fp8(v, elem).view(Mp, Kp)[:M, :K]
            out += [d.contiguous(), _pad(e[:M].to(torch.uint8), _rup(M, 128), _rup(Kp // 32, 4))]
        if col:
            xb = xp.view(Mp // 32, 32, Kp)
            e, f = _e8m0_rceil(a.view(Mp // 32, 32, Kp).amax(1).float(), inv)  # [M/32, Kp]
            v = xb * f[:, None, :]
            e = e[:, :K].to(torch.uint8)
            if fp4:  # transposed [K, M/2]: rows 2j and 2j+1 of x share a byte
                d = _e2m1_packed(v, 1).view(Mp // 2, Kp)[:M // 2, :K]
                out += [d.t().contiguous(), _pad(e.t(), _rup(K, 128), _rup(Mp // 32, 4))]
            else:
                out += [_fp8(v, elem).view(Mp, Kp)[:M, :K].contiguous(), _pad(e, _rup(Mp // 32, 4), _rup(K, 128))]
        return tuple(out)

    return q


# ---------------------------------------------------------------------------------------------
# NVFP4: 16-element blocks (1D) or 16x16 tiles (2D), ue4m3 block scales under an fp32 tensor scale


def _two_level(a):
    """(global amax f32[1], S_dec, m = S_enc * (1/6)) from |x| (zero padding does not matter)."""
    g = a.amax().float().reshape(1)
    s_enc = _div(2688.0, g).clamp(max=FLT_MAX)  # 448 * 6 / G, Inf -> FLT_MAX
    s_enc = torch.where((g == 0) | (s_enc == 0), 1.0, s_enc)
    s_dec = (1.0 / s_enc.double()).float()
    return g, s_dec, s_enc * _INV6


def _nv_block(amax, s_dec, m):
    """Block amax -> (ue4m3 scale code uint8, encode factor fp32)."""
    code = _fp8((amax * m).clamp(max=448.0), "e4m3")  # amax * m >= 0: sign bit 0
    enc = _div(1.0, code.view(torch.float8_e4m3fn).float() * s_dec).clamp(max=FLT_MAX)
    return code, enc


def _nvfp4(row, col):
    def q(x):
        x = x.contiguous()  # no-op for the usual contiguous input
        M, K = x.shape
        xp = _pad(x, _rup(M, 16) if col else M, _rup(K, 16) if row else K)
        Mp, Kp = xp.shape
        a = xp.abs()  # once for the global amax and both directions
        g, s_dec, m = _two_level(a)
        out = []
        if row:
            xb = xp.view(Mp, Kp // 16, 16)
            sc, enc = _nv_block(a.view(Mp, Kp // 16, 16).amax(-1).float(), s_dec, m)  # [Mp, K/16]
            d = _e2m1_packed(xb * enc[:, :, None], -1).view(Mp, Kp // 2)[:M, :K // 2]
            out += [d.contiguous(), _pad(sc[:M], _rup(M, 128), _rup(Kp // 16, 4))]
        if col:
            xb = xp.view(Mp // 16, 16, Kp)
            sc, enc = _nv_block(a.view(Mp // 16, 16, Kp).amax(1).float(), s_dec, m)  # [M/16, Kp]
            d = _e2m1_packed(xb * enc[:, None, :], 1).view(Mp // 2, Kp)[:M // 2, :K]
            out += [d.t().contiguous(), _pad(sc[:, :K].t(), _rup(K, 128), _rup(Mp // 16, 4))]
        return tuple(out + [g])

    return q


def _nvfp4_2d(row, col):
    def q(x):
        x = x.contiguous()  # no-op for the usual contiguous input
        M, K = x.shape
        xp = _pad(x, _rup(M, 16), _rup(K, 16))
        Mp, Kp = xp.shape
        mt, kt = Mp // 16, Kp // 16
        xb = xp.view(mt, 16, kt, 16)
        a = xb.abs()
        g, s_dec, m = _two_level(a)
        sc, enc = _nv_block(a.amax((1, 3)).float(), s_dec, m)  # [mt, kt]
        v = xb * enc[:, None, :, None]
        out = []
        if row:  # the tile's scale repeated over its 16 rows
            s = sc[:, None, :].expand(mt, 16, kt).reshape(Mp, kt)[:M]
            d = _e2m1_packed(v, 3).view(Mp, Kp // 2)[:M, :K // 2]
            out += [d.contiguous(), _pad(s, _rup(M, 128), _rup(kt, 4))]
        if col:  # one scale per tile: the columnwise copy is the transpose
            s = sc.t()[:, None, :].expand(kt, 16, mt).reshape(Kp, mt)[:K]
            d = _e2m1_packed(v, 1).view(Mp // 2, Kp)[:M // 2, :K]
            out += [d.t().contiguous(), _pad(s, _rup(K, 128), _rup(mt, 4))]
        return tuple(out + [g])

    return q


# ---------------------------------------------------------------------------------------------
# registry

def _own_code(fn, name):
    """fn with a code object of its own: dynamo keeps its compile cache (and recompile limit, 8)
    per code object, and the closures of one maker share theirs."""
    f = types.FunctionType(fn.__code__.replace(co_name=name), fn.__globals__, name, fn.__defaults__, fn.__closure__)
    f.__qualname__ = name
    return f


_DIRS = {"rowwise": (True, False), "columnwise": (False, True), "both": (True, True)}
_MAKERS = {
    "fp8_e4m3_tensor": (lambda r, c: _fp8_tensor("e4m3", r, c), ["amax", "scale"]),
    "fp8_e5m2_tensor": (lambda r, c: _fp8_tensor("e5m2", r, c), ["amax", "scale"]),
    "fp8_block_1x128": (_fp8_block_1d, []),
    "fp8_block_128x128": (_fp8_block_2d, []),
    "mxfp8_e4m3": (lambda r, c: _mx("e4m3", r, c), []),
    "mxfp8_e5m2": (lambda r, c: _mx("e5m2", r, c), []),
    "mxfp4": (lambda r, c: _mx("e2m1", r, c), []),
    "nvfp4": (_nvfp4, ["amax"]),
    "nvfp4_2d": (_nvfp4_2d, ["amax"]),
}
QUANTIZERS = {}
OUTPUT_FIELDS = {}
for _fmt, (_make, _extra) in _MAKERS.items():
    for _dname, (_r, _c) in _DIRS.items():
        QUANTIZERS[(_fmt, _dname)] = _own_code(_make(_r, _c), f"{_fmt}_{_dname}")
        OUTPUT_FIELDS[(_fmt, _dname)] = (["rowwise_data", "rowwise_scale_inv"] if _r else []) + \
            (["columnwise_data", "columnwise_scale_inv"] if _c else []) + _extra


# ---------------------------------------------------------------------------------------------
# self-check against blockcast's CPU reference


def _input(M, K, dtype, seed):
    """randn with rows and 32-column groups at different magnitudes, an all-zero 128x128 block,
    a tiny (1e-30) block and a block at the bottom of bf16's range (denormals included)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g)
    x *= 10.0 ** torch.randint(-3, 4, (M, 1), generator=g).float()
    x *= 4.0 ** torch.randint(-2, 3, (1, _cdiv(K, 32)), generator=g).float().repeat_interleave(32, 1)[:, :K]
    b = min(128, M // 2, K // 2)
    x[:b, :b] = 0
    x[b:2 * b, :b] *= 1e-30
    x[:b, b:2 * b] = torch.randn(b, b, generator=g) * 1e-38
    return x.to(dtype)


def _first_mismatch(names, got, ref):
    """None, or a description of the first output that differs from blockcast's (shape, bytes)."""
    if len(got) != len(names):
        return f"{len(got)} outputs, expected {len(names)}"
    for name, g in zip(names, got):
        want = getattr(ref, name)
        if tuple(g.shape) != tuple(want.shape) or g.element_size() != want.element_size() or not g.is_contiguous():
            return (f"{name}: shape {tuple(g.shape)} {g.dtype} contiguous {g.is_contiguous()}, "
                    f"expected {tuple(want.shape)} {want.dtype}")
        gb, wb = g.view(torch.uint8), want.contiguous().view(torch.uint8)
        bad = (gb != wb).nonzero()
        if len(bad):
            i = tuple(bad[0].tolist())
            return f"{name}{list(i)}: got 0x{int(gb[i]):02X} expected 0x{int(wb[i]):02X} ({len(bad)} bytes differ)"
    return None


def selfcheck(compile=False, shapes=((256, 512), (384, 256), (130, 200)),
              dtypes=(torch.bfloat16, torch.float16, torch.float32), keys=None, device="cpu"):
    """Compare every output byte with blockcast.ref.quantize (inputs made on the CPU, run on
    device); one line per key. compile=True also checks torch.compile(fullgraph=True,
    dynamic=False) of each quantizer, on aligned shapes only when device is the CPU: torch 2.11's
    C++ backend miscompiles a block reduction over a padded view followed by a cropped pointwise
    (its outer-loop fusion runs the second loop nest over one block's width instead of K); the
    GPU (Triton) backend does not."""
    import blockcast
    ok_all = True
    if compile:  # each (shape, dtype) is one compile of the key's code object: more than the default 8
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    for key in keys or QUANTIZERS:
        fmt, dname = key
        r, c = _DIRS[dname]
        fns = [("eager", QUANTIZERS[key])]
        if compile:
            fns.append(("compile", torch.compile(QUANTIZERS[key], fullgraph=True, dynamic=False)))
        msg = None
        for (M, K) in shapes:
            for dt in dtypes:
                x = _input(M, K, dt, seed=M * 7 + K)
                ref = blockcast.ref.quantize(x, fmt, rowwise=r, columnwise=c)
                for mode, f in fns:
                    if mode == "compile" and device == "cpu" and (M % 128 or K % 128):
                        continue
                    msg = _first_mismatch(OUTPUT_FIELDS[key], [t.cpu() for t in f(x.to(device))], ref)
                    if msg:
                        msg = f"MISMATCH first index {msg} ({mode}, {M}x{K} {str(dt)[6:]})"
                        break
                if msg:
                    break
            if msg:
                break
        ok_all &= msg is None
        print(f"{fmt:18s} {dname:10s} {msg or 'ok'}", flush=True)
    return ok_all


if __name__ == "__main__":  # [--compile] [--cuda]
    import sys
    sys.exit(0 if selfcheck(compile="--compile" in sys.argv, device="cuda" if "--cuda" in sys.argv else "cpu") else 1)
