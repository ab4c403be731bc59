#!/usr/bin/env python3
"""blockcast.torch on a GPU: Linear's output and gradients against the explicit reference
(quantize -> dequantize -> float32 matmuls) for every recipe, float32 and bfloat16; how each GEMM
ran; torch.compile(fullgraph=True) gives the eager numbers; weights quantized in one list launch
equal one quantize each; the amax communicators given at the call (two local groups, threads);
a tiny GPT's loss with every recipe within a stated band of bf16 over 200 steps. TAP output.
Run: BLOCKCAST_LIBRARY=path/libblockcast.so.0 python3 runtime/python/tests/test_torch_gpu.py"""
import copy
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)
from tap import run, skip, skip_all  # noqa: E402

try:
    import torch
except ImportError:
    skip_all("torch is not installed")
if not torch.cuda.is_available():
    skip_all("no CUDA device")

import blockcast as bc  # noqa: E402
import blockcast.torch as bct  # noqa: E402
import torch_ref  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
DEV = torch.device("cuda")
SCALED = ("fp8_current", "fp8_delayed", "fp8_blockwise")  # recipes with GEMMs torch._scaled_mm may take


def sample(*shape, scale=1.0, dtype=torch.float32):
    return (torch.randn(*shape, device=DEV) * scale).to(dtype)


def run_layer(lin, x, dy, **kw):
    x = x.clone().requires_grad_(True)
    y = lin(x, **kw)
    y.backward(dy)
    return y.detach(), x.grad, lin.weight.grad, lin.bias.grad


def test_linear_vs_reference():
    """every recipe, float32 and bfloat16, aligned and ragged 3D shapes: y, dx, dw, db against the
    explicit reference; emulated GEMMs agree to float32 rounding, torch._scaled_mm ones to the
    tensor cores' accumulation"""
    worst = {}
    for name, recipe in bct.RECIPES.items():
        for dtype in (torch.float32, torch.bfloat16):
            for xshape, n in (((256, 512), 384), ((2, 67, 160), 96)):
                torch.manual_seed(11)
                k = xshape[-1]
                lin = bct.Linear(k, n, recipe=recipe, device=DEV, dtype=dtype)
                x, dy = sample(*xshape, dtype=dtype), sample(*xshape[:-1], n, scale=1e-3, dtype=dtype)
                offset = int(lin.sr_counter[0])
                got = run_layer(lin, x, dy)
                scales = [torch.ones(1, device=DEV)] * 3 if recipe.delayed else (None, None, None)  # step 1: scale 1
                want = torch_ref.linear(recipe, x, lin.weight.detach(), lin.bias.detach(), dy, scales=scales,
                                        seed=lin.sr_seed, offset=offset)
                for what, g, w in zip(("y", "dx", "dw", "db"), got, want):
                    r = torch_ref.rel(g, w)
                    key = (name, str(dtype).replace("torch.", ""), what)
                    worst[key] = max(worst.get(key, 0.0), r)
    for (name, dt, what), r in sorted(worst.items()):
        tol = (5e-3 if name in SCALED else 2e-6) if dt == "float32" else 1.2e-2
        if what == "db":
            tol = 2e-6 if dt == "float32" else 1e-2
        print(f"# {name:14s} {dt:8s} {what:2s} relative difference from the reference {r:.2e} (tolerance {tol:.0e})")
        assert r < tol, f"{name} {dt}: {what} differs from the reference by {r:.2e}"
    for k, v in sorted(bct.gemm_paths().items(), key=str):
        print(f"# GEMM {k[0]} {k[1]} x {k[2]} {k[3]} ({k[4]}): {v}")


def test_gpu_layer_equals_cpu_layer():
    """the layer on the GPU and the same layer on the CPU (every step through the CPU reference)
    give the same numbers for the recipes whose GEMMs are emulated (float32)"""
    for name in ("mxfp8", "nvfp4", "mxfp4"):
        torch.manual_seed(5)
        lin = bct.Linear(192, 80, recipe=name, device=DEV)
        cpu = copy.deepcopy(lin).cpu()
        cpu.sr_seed, cpu.sr_counter = lin.sr_seed, lin.sr_counter.clone()
        x, dy = sample(70, 192), sample(70, 80, scale=1e-2)
        g = run_layer(lin, x, dy)
        c = run_layer(cpu, x.cpu(), dy.cpu())
        for what, a, b in zip(("y", "dx", "dw", "db"), g, c):
            r = torch_ref.rel(a.cpu(), b)
            assert r < 2e-6, f"{name}: {what} GPU vs CPU {r:.2e}"


def _mlp(recipe, dtype=torch.float32):
    torch.manual_seed(21)
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)).to(DEV, dtype)
    bct.swap_linear(m, recipe)
    return m


def test_compile_fullgraph():
    """torch.compile(fullgraph=True): forward and backward of the swapped model compile without
    graph breaks and give the eager numbers"""
    if not hasattr(torch, "compile"):
        skip("torch.compile is not available")
    for name in ("fp8_current", "fp8_blockwise", "mxfp8", "nvfp4", "fp8_delayed"):
        eager, comp = _mlp(name), _mlp(name)
        comp.load_state_dict(eager.state_dict())
        for a, b in zip(eager.modules(), comp.modules()):
            if isinstance(a, bct.Linear):
                b.sr_seed, b.sr_counter = a.sr_seed, a.sr_counter.clone()
        x, dy = sample(128, 256), sample(128, 256, scale=1e-2)
        outs = []
        for m, f in ((eager, eager), (comp, torch.compile(comp, fullgraph=True))):
            for step in range(2):
                xx = x.clone().requires_grad_(True)
                y = f(xx)
                y.backward(dy)
            outs.append([y.detach(), xx.grad] + [p.grad for p in m.parameters()])
        for i, (a, b) in enumerate(zip(*outs)):
            r = torch_ref.rel(b, a)
            assert r < 1e-6, f"{name}: output {i} compiled vs eager {r:.2e}"
        if name == "fp8_delayed":
            assert torch.equal(eager[0].amax_history, comp[0].amax_history), "delayed scaling state differs"
        torch._dynamo.reset()


def test_compile_dynamic_tokens():
    """torch.compile(dynamic=True, fullgraph=True) of the swapped model: one compile for batches of
    four token counts (the custom ops' fake shapes stay symbolic), every step the eager numbers"""
    if not hasattr(torch, "compile"):
        skip("torch.compile is not available")
    from torch._dynamo.testing import CompileCounterWithBackend
    for name in ("fp8_current", "mxfp8", "nvfp4"):
        eager, comp = _mlp(name), _mlp(name)
        comp.load_state_dict(eager.state_dict())
        for a, b in zip(eager.modules(), comp.modules()):
            if isinstance(a, bct.Linear):
                b.sr_seed, b.sr_counter = a.sr_seed, a.sr_counter.clone()
        cnt = CompileCounterWithBackend("inductor")
        cf = torch.compile(comp, backend=cnt, dynamic=True, fullgraph=True)
        for rows in (64, 96, 160, 256):
            x, dy = sample(rows, 256), sample(rows, 256, scale=1e-2)
            outs = []
            for f in (eager, cf):
                xx = x.clone().requires_grad_(True)
                y = f(xx)
                y.backward(dy)
                outs.append((y.detach(), xx.grad))
            for i, (a, b) in enumerate(zip(*outs)):
                r = torch_ref.rel(b, a)
                assert r < 1e-6, f"{name} rows {rows}: output {i} compiled vs eager {r:.2e}"
        assert cnt.frame_count == 1, f"{name}: {cnt.frame_count} compiles for 4 token counts"
        torch._dynamo.reset()


def test_quantize_weights_list():
    """quantize_weights: every weight of the model in one list call, bit-identical to quantizing
    each alone; the forward uses it until the optimizer changes the weight"""
    m = torch.nn.Sequential(torch.nn.Linear(256, 384), torch.nn.Linear(384, 200), torch.nn.Linear(200, 64)).to(DEV)
    bct.swap_linear(m, "fp8_blockwise")
    m[1] = bct.Linear.from_linear(torch.nn.Linear(384, 200).to(DEV), "nvfp4")
    m[2] = bct.Linear.from_linear(torch.nn.Linear(200, 64).to(DEV), "fp8_delayed")  # delayed: quantized in the forward
    assert bct.quantize_weights(m) == 2
    for lin in (m[0], m[1]):
        got = lin._wcache[2]
        want = bc.quantize(lin.weight.detach(), lin.recipe.weight.format, rowwise=True, columnwise=True)
        for f in ("rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv"):
            a, b = getattr(got, f), getattr(want, f)
            assert torch.equal(a.view(torch.uint8), b.view(torch.uint8)), f"{lin.recipe.name}: {f} differs"
    x = sample(64, 256)
    with torch.no_grad():  # (no delayed-scaling update between the two calls)
        y_cached = m(x)
        assert m[0]._wcache is not None
        m[0]._wcache = m[1]._wcache = None
        assert torch.equal(y_cached, m(x)), "the cached weights changed the output"
    bct.quantize_weights(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    m(x).sum().backward()
    opt.step()
    assert m[0]._cached_weight(True) is None, "a stale weight was kept after the optimizer step"


def test_amax_communicators_at_the_call():
    """fp8_current on two local ranks (threads): the forward's amaxes reduced over one group, the
    backward's over another; each rank's y, dx, dw equal the reference with the group's scales"""
    recipe = bct.RECIPES["fp8_current"]
    fwd, bwd = bc.Comm.local(2), bc.Comm.local(2)
    torch.manual_seed(9)
    base = bct.Linear(256, 128, recipe=recipe, device=DEV)
    xs = [sample(64, 256), sample(64, 256, scale=30.0)]
    dys = [sample(64, 128, scale=1e-3), sample(64, 128, scale=1e-5)]
    got, errs = [None, None], []

    def body(r):
        # the backward is called on this thread (y.grad_fn): autograd's engine runs every backward
        # of one GPU on one worker thread, where two ranks of one process would wait for each other
        try:
            lin = copy.deepcopy(base)
            x = xs[r].clone().requires_grad_(True)
            y = lin(x, amax_comm=fwd[r], grad_amax_comm=bwd[r])
            dx, dw, db = y.grad_fn.apply(dys[r])[:3]
            torch.cuda.synchronize()
            got[r] = (y.detach(), dx, dw, db)
        except Exception as e:  # noqa: BLE001
            errs.append(f"rank {r}: {e}")
    th = [threading.Thread(target=body, args=(r,)) for r in range(2)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert not errs, errs
    fx = bc.format(recipe.input.format)
    fd = bc.format(recipe.grad_output.format)
    ax = torch.stack([bc.amax(x) for x in xs]).max().reshape(1)
    ad = torch.stack([bc.amax(d) for d in dys]).max().reshape(1)
    sx, _ = bc.compute_scale(fx, ax)
    sd, _ = bc.compute_scale(fd, ad)
    sw, _ = bc.compute_scale(fx, bc.amax(base.weight.detach()))
    for r in range(2):
        want = torch_ref.linear(recipe, xs[r], base.weight.detach(), base.bias.detach(), dys[r], scales=(sx, sw, sd))
        for what, g, w in zip(("y", "dx", "dw", "db"), got[r], want):
            rr = torch_ref.rel(g, w)
            assert rr < 5e-3, f"rank {r}: {what} differs from the reference with the group's scales by {rr:.2e}"
        alone = torch_ref.linear(recipe, xs[r], base.weight.detach(), base.bias.detach(), dys[r])
        if r == 0:  # rank 0's own scales differ from the group's: the check has teeth
            assert torch_ref.rel(got[r][0], alone[0]) > torch_ref.rel(got[r][0], want[0])
    for c in fwd + bwd:
        c.close()


def test_tiny_gpt_loss_band():
    """a 0.5M-parameter GPT, 200 steps: every recipe's loss (mean of the last 20 steps) within 5% of
    bf16 for the 8-bit recipes, 10% for the 4-bit ones"""
    import train_gpt as tg

    class Cfg:
        seed, seq, d_model, layers, heads, batch = 1, 64, 128, 2, 4, 32
        steps, lr, warmup, eval_every, val_batches, compile = 200, 3e-3, 20, 200, 4, False
    text, _ = tg.load_text(2 << 20)
    tok = torch.frombuffer(bytearray(text), dtype=torch.uint8)
    cut = int(tok.numel() * 0.9)
    res = {}
    for name in ["bf16"] + list(bct.RECIPES):
        run = tg.train(name, Cfg, tok[:cut], tok[cut:], DEV, log=lambda s: None)
        res[name] = sum(v for _, v in run["train"][-20:]) / 20
    for name, v in res.items():
        d = v / res["bf16"] - 1
        band = 0.10 if "fp4" in name else 0.05
        print(f"# {name:14s} loss {v:.4f}  vs bf16 {100 * d:+.2f}% (band {100 * band:.0f}%)")
        assert abs(d) < band, f"{name}: loss {v:.4f} is {100 * d:+.2f}% from bf16's {res['bf16']:.4f}"


if __name__ == "__main__":
    sys.exit(run(globals()))
