#!/usr/bin/env python3
"""blockcast.torch on the CPU (every quantization through the CPU reference): recipes and their
errors, Linear's forward and backward against the explicit reference for every recipe, delayed
scaling's history and scales, state_dict round trip, swap_linear, errors. TAP output.
Run: python3 runtime/python/tests/test_torch_cpu.py (a python3 with torch; BLOCKCAST_LIBRARY or BC_BUILD)."""
import io
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import run, skip_all  # noqa: E402

try:
    import torch
except ImportError:
    skip_all("torch is not installed")
if "BLOCKCAST_LIBRARY" not in os.environ and os.environ.get("BC_BUILD"):
    os.environ["BLOCKCAST_LIBRARY"] = os.path.join(os.environ["BC_BUILD"], "lib", "libblockcast.so.0")

import blockcast as bc  # noqa: E402
import blockcast.torch as bct  # noqa: E402
import torch_ref  # noqa: E402

torch.manual_seed(7)


def raises(fn, *parts):
    try:
        fn()
    except bc.BlockcastError as e:
        for p in parts:
            assert p in str(e), f"message {str(e)!r} lacks {p!r}"
        return
    raise AssertionError(f"no BlockcastError (expected one saying {parts})")


def sample(*shape, scale=1.0):
    return (torch.randn(*shape) * scale).float()


def run_layer(lin, x, dy):
    x = x.clone().requires_grad_(True)
    y = lin(x)
    y.backward(dy)
    return y.detach(), x.grad, lin.weight.grad, None if lin.bias is None else lin.bias.grad


def test_recipes():
    """the built-in recipes resolve; every one names a format per operand with both directions"""
    assert set(bct.RECIPES) >= {"fp8_current", "fp8_delayed", "fp8_blockwise", "mxfp8", "nvfp4", "mxfp4"}
    for name, r in bct.RECIPES.items():
        assert bct.get_recipe(name) is r
        for op in r.operands():
            f = bc.format(op.format)
            assert f.has_rowwise and f.has_columnwise, name
    assert bct.RECIPES["fp8_delayed"].delayed and not bct.RECIPES["fp8_current"].delayed
    mine = bct.Recipe("mine", "mxfp8_e4m3", "fp8_block_128x128", bct.Operand("mxfp8_e5m2"))
    assert mine.check() is mine and mine.input == bct.Operand("mxfp8_e4m3")


def test_recipe_errors():
    """bad recipes are refused naming the operand and what would be right"""
    raises(lambda: bct.get_recipe("fp9"), "fp9", "fp8_current")
    raises(lambda: bct.Recipe("r", bct.Operand("mxfp8_e4m3", "delayed"), "mxfp8_e4m3", "mxfp8_e4m3").check(),
           "input", "delayed", "per-tensor")
    raises(lambda: bct.Recipe("r", "mxfp8_e4m3", bct.Operand("mxfp8_e4m3", stochastic_rounding=True),
                              "mxfp8_e4m3").check(), "weight", "stochastic")
    raises(lambda: bct.Recipe("r", "mxfp8_e4m3", "mxfp8_e4m3", bct.Operand("mxfp8_e4m3", "sometimes")).check(),
           "grad_output", "'current' or 'delayed'")
    raises(lambda: bct.Recipe("r", "nope", "mxfp8_e4m3", "mxfp8_e4m3").check(), "nope")
    raises(lambda: bct.Recipe("r", 3, "mxfp8_e4m3", "mxfp8_e4m3"), "input", "Operand")
    raises(lambda: bct.Recipe("r", "mxfp8_e4m3", "mxfp8_e4m3", "mxfp8_e4m3", amax_algo="mean"), "amax_algo")
    raises(lambda: bct.Recipe("r", "mxfp8_e4m3", "mxfp8_e4m3", "mxfp8_e4m3", history_len=0), "history_len")


def test_linear_matches_reference():
    """every recipe: y, dx, dw, db equal the explicit quantize -> dequantize -> matmul reference
    (float32, CPU reference); the result is also near the unquantized layer"""
    shapes = [((48, 256), 160), ((2, 17, 96), 64)]  # a 3D input with 34 ragged rows
    for name, recipe in bct.RECIPES.items():
        for xshape, n in shapes:
            k = xshape[-1]
            lin = bct.Linear(k, n, recipe=recipe)
            x, dy = sample(*xshape), sample(*xshape[:-1], n, scale=1e-3)
            offset = int(lin.sr_counter[0])
            got = run_layer(lin, x, dy)
            want = torch_ref.linear(recipe, x, lin.weight.detach(), lin.bias.detach(), dy,
                                    scales=(1.0, 1.0, 1.0) if recipe.delayed else (None, None, None),
                                    seed=lin.sr_seed, offset=offset)
            for what, g, w in zip(("y", "dx", "dw", "db"), got, want):
                r = torch_ref.rel(g, w)
                assert r < 1e-5, f"{name} {xshape}: {what} differs from the reference by {r:.2e}"
            plain = x @ lin.weight.detach().t() + lin.bias.detach()
            r = torch_ref.rel(got[0], plain)
            band = 0.3 if "fp4" in name else 0.1
            assert r < band, f"{name}: y is {r:.2e} away from the unquantized layer"


def test_no_bias_and_frozen():
    """no bias; a frozen weight (no dw, no columnwise weight copy needed); an input without grad"""
    lin = bct.Linear(64, 32, bias=False, recipe="mxfp8")
    x = sample(8, 64)
    dy = sample(8, 32)
    y = lin(x)  # x without grad: only dw
    y.backward(dy)
    want = torch_ref.linear(lin.recipe, x, lin.weight.detach(), None, dy)
    assert torch_ref.rel(lin.weight.grad, want[2]) < 1e-5
    lin.weight.requires_grad_(False)
    xg = x.clone().requires_grad_(True)
    lin(xg).backward(dy)
    assert torch_ref.rel(xg.grad, want[1]) < 1e-5


def test_delayed_scaling():
    """delayed scaling: step 1 quantizes with scale 1 and records the amaxes; step 2's scales are
    element_max / max(history) (e4m3 448, e5m2 57344), the history rolls; the reference with those
    scales gives the same numbers"""
    lin = bct.Linear(128, 64, recipe=bct.Recipe("d", bct.Operand("fp8_e4m3_tensor", "delayed"),
                                                bct.Operand("fp8_e4m3_tensor", "delayed"),
                                                bct.Operand("fp8_e5m2_tensor", "delayed"), history_len=4))
    x1, dy1 = sample(16, 128, scale=3.0), sample(16, 64, scale=1e-2)
    run_layer(lin, x1, dy1)
    amaxes = [float(x1.abs().max()), float(lin.weight.detach().abs().max()), float(dy1.abs().max())]
    h = lin.amax_history
    for i, a in enumerate(amaxes):
        assert float(h[i, 0, 0]) == a, f"slot {i}: history[0] {float(h[i, 0, 0])} != amax {a}"
        assert float(lin.scale[i, 0]) == 1.0
    lin.weight.grad = lin.bias.grad = None
    x2, dy2 = sample(16, 128, scale=0.5), sample(16, 64, scale=1e-2)
    got = run_layer(lin, x2, dy2)
    maxes = (448.0, 448.0, 57344.0)
    scales = []
    for i, a in enumerate(amaxes):
        s = float(lin.scale[i, 0])
        want = torch.tensor(maxes[i], dtype=torch.float32) / torch.tensor(a, dtype=torch.float32)
        assert s == float(want), f"slot {i}: scale {s} != {float(want)}"
        assert float(h[i, -1, 0]) == a, f"slot {i}: the history did not roll (old row 0 goes last)"
        scales.append(torch.tensor([s], dtype=torch.float32))
    want = torch_ref.linear(lin.recipe, x2, lin.weight.detach(), lin.bias.detach(), dy2, scales=scales)
    for what, g, w in zip(("y", "dx", "dw", "db"), got, want):
        assert torch_ref.rel(g, w) < 1e-5, f"step 2: {what} differs from the reference"
    lin.eval()  # eval: neither updates nor records
    before = lin.amax_history.clone()
    with torch.no_grad():
        lin(x2)
    assert torch.equal(before, lin.amax_history)


def test_state_dict():
    """the delayed-scaling state and the recipe travel with state_dict; a checkpoint of another recipe is refused"""
    def model(recipe):
        torch.manual_seed(3)
        m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 16))
        bct.swap_linear(m, recipe)
        return m
    a = model("fp8_delayed")
    for _ in range(3):
        a(sample(8, 64)).sum().backward()
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    b = model("fp8_delayed")
    buf.seek(0)
    b.load_state_dict(torch.load(buf))
    assert torch.equal(a[0].amax_history, b[0].amax_history) and torch.equal(a[2].scale, b[2].scale)
    assert int(b[0].sr_counter[0]) == int(a[0].sr_counter[0])
    x = sample(8, 64)
    assert torch.equal(a(x), b(x))
    c = model("mxfp8")
    buf.seek(0)
    raises(lambda: c.load_state_dict(torch.load(buf), strict=False), "fp8_delayed", "mxfp8")


def test_swap_linear():
    """swap_linear replaces nn.Linear layers in place, sharing their parameters; include filters"""
    m = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU()),
                            torch.nn.Linear(32, 8))
    w0 = m[0].weight
    names = bct.swap_linear(m, "mxfp8", include=lambda name, mod: name != "2")
    assert names == ["0", "1.0"], names
    assert isinstance(m[0], bct.Linear) and isinstance(m[1][0], bct.Linear) and type(m[2]) is torch.nn.Linear
    assert m[0].weight is w0 and m[0].recipe.name == "mxfp8"
    assert "recipe=mxfp8" in repr(m[0])
    assert bct.swap_linear(m, "mxfp8") == ["2"]


def test_errors():
    """wrong inputs name what was wrong"""
    lin = bct.Linear(64, 32, recipe="fp8_current")
    raises(lambda: lin(sample(4, 63)), "(4, 63)", "64")
    raises(lambda: lin(sample(4, 64), amax_comm=object()), "communicator")
    raises(lambda: bct.Linear.from_linear(torch.nn.Conv1d(1, 1, 1)), "nn.Linear")
    raises(lambda: bct.quantize_operand(sample(4, 64), bct.RECIPES["fp8_delayed"], 0, True, False), "history")


if __name__ == "__main__":
    sys.exit(run(globals()))
