#!/usr/bin/env python3
"""Train a small GPT on text that ships with Python (its standard library's sources, read as bytes)
with bf16 and with each blockcast recipe, from one seed, and record the loss curves.

    python3 runtime/python/examples/train_gpt.py --out results/ [--steps 2000] [--recipes bf16,fp8_current,...]

Writes OUT/loss.csv (recipe, step, train_loss, val_loss), OUT/loss.png (if matplotlib is there),
OUT/summary.md (final losses vs bf16, tokens/s vs bf16, how each GEMM ran). Every recipe sees the
same batches in the same order and starts from the same weights; the non-Linear parts (embeddings,
attention softmax, norms, the output head) stay in bf16 autocast, as in the recipes' papers.
The Linear layers of the blocks are swapped for blockcast.torch.Linear (blockcast.torch.swap_linear)
and their weights quantized once per step (blockcast.torch.quantize_weights)."""
import argparse
import csv
import math
import os
import sys
import sysconfig
import time

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import blockcast.torch as bct  # noqa: E402


# ---- data: the standard library's Python sources, as bytes ---------------------------------------

def load_text(max_bytes):
    """Python's own .py files in sorted order, concatenated up to max_bytes: (bytes, where from)."""
    root = sysconfig.get_paths()["stdlib"]
    parts, n = [], 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "dist-packages", "__pycache__"))
        for fn in sorted(filenames):
            if fn.endswith(".py"):
                with open(os.path.join(dirpath, fn), "rb") as fh:
                    b = fh.read()
                parts.append(b)
                n += len(b)
                if n >= max_bytes:
                    return b"".join(parts)[:max_bytes], root
    return b"".join(parts), root


class Batches:
    """Random windows of the token stream from a seeded generator: the same sequence per recipe."""

    def __init__(self, tokens, batch, seq, seed, device):
        self.tokens, self.batch, self.seq, self.device = tokens, batch, seq, device
        self.gen = torch.Generator().manual_seed(seed)

    def next(self):
        ix = torch.randint(0, self.tokens.numel() - self.seq - 1, (self.batch,), generator=self.gen)
        w = torch.stack([self.tokens[i:i + self.seq + 1] for i in ix.tolist()]).to(self.device, non_blocking=True)
        return w[:, :-1].long(), w[:, 1:].long()


# ---- model ---------------------------------------------------------------------------------------

class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=256, seq=256, d=512, layers=6, heads=8):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.apply(self._init)
        for n, p in self.named_parameters():
            if n.endswith("proj.weight") or n.endswith("out.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def build(recipe, cfg, device):
    torch.manual_seed(cfg.seed)
    model = GPT(256, cfg.seq, cfg.d_model, cfg.layers, cfg.heads).to(device)
    if recipe != "bf16":  # the blocks' Linear layers; the output head stays in bf16
        bct.swap_linear(model, recipe, include=lambda name, m: name.startswith("blocks."))
    return model


def lr_at(step, cfg):
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    p = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * p)))


def train(recipe, cfg, train_tok, val_tok, device, log=print):
    """One run: returns {'train': [(step, loss)], 'val': [(step, loss)], 'tokens_per_s': float}."""
    model = build(recipe, cfg, device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.1, fused=device.type == "cuda")
    batches = Batches(train_tok, cfg.batch, cfg.seq, cfg.seed + 1, device)
    val = Batches(val_tok, cfg.batch, cfg.seq, cfg.seed + 2, device)
    val_batches = [val.next() for _ in range(cfg.val_batches)]
    step_fn = model
    if cfg.compile:
        step_fn = torch.compile(model)
    out = {"train": [], "val": []}
    quantized_weights = recipe != "bf16"
    t0 = None
    timed_from = min(20, cfg.steps - 1)
    for step in range(cfg.steps):
        if step == timed_from:
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        x, y = batches.next()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = step_fn(x)
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if quantized_weights:
            bct.quantize_weights(model)
        out["train"].append((step, loss.detach()))
        if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
            model.eval()
            with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16):
                vl = sum(F.cross_entropy(model(a).float().view(-1, 256), b.view(-1)) for a, b in val_batches)
            model.train()
            vl = float(vl) / len(val_batches)
            out["val"].append((step + 1, vl))
            log(f"{recipe:>14} step {step + 1:5d}  train {loss.detach().item():.4f}  val {vl:.4f}")
    if device.type == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    out["tokens_per_s"] = (cfg.steps - timed_from) * cfg.batch * cfg.seq / dt
    out["train"] = [(s, float(v)) for s, v in out["train"]]
    out["params"] = sum(p.numel() for p in model.parameters())
    return out


def final_train_loss(run, last=100):
    xs = [v for _, v in run["train"][-last:]]
    return sum(xs) / len(xs)


def write_results(runs, cfg, where, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "loss.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["recipe", "step", "train_loss", "val_loss"])
        for name, run in runs.items():
            val = dict(run["val"])
            for s, v in run["train"]:
                w.writerow([name, s + 1, f"{v:.5f}", f"{val[s + 1]:.5f}" if s + 1 in val else ""])
    base = runs.get("bf16")
    lines = [f"# {cfg.steps} steps, batch {cfg.batch} x {cfg.seq} tokens, d_model {cfg.d_model}, {cfg.layers} layers, "
             f"{cfg.heads} heads, {next(iter(runs.values()))['params'] / 1e6:.1f}M parameters, seed {cfg.seed}",
             f"# text: the .py files of {where} (bytes as tokens), {cfg.text_bytes} bytes, last 10% held out",
             "", "| recipe | final train loss (mean of last 100 steps) | vs bf16 | final val loss | vs bf16 | tokens/s | vs bf16 |",
             "|---|---|---|---|---|---|---|"]
    for name, run in runs.items():
        ft, fv, tps = final_train_loss(run), run["val"][-1][1], run["tokens_per_s"]
        rel = (lambda a, b: f"{100 * (a / b - 1):+.2f}%") if base else (lambda a, b: "")
        lines.append(f"| {name} | {ft:.4f} | {rel(ft, final_train_loss(base)) if base else ''} | {fv:.4f} | "
                     f"{rel(fv, base['val'][-1][1]) if base else ''} | {tps:,.0f} | "
                     f"{tps / base['tokens_per_s']:.2f}x |" if base else f"| {name} | {ft:.4f} | | {fv:.4f} | | {tps:,.0f} | |")
    lines += ["", "GEMM paths (torch._scaled_mm or emulation: dequantize + bf16 matmul):"]
    for k, v in sorted(bct.gemm_paths().items(), key=str):
        lines.append(f"- {k[0]} {k[1]} x {k[2]} {k[3]} ({str(k[4]).replace('torch.', '')}): {v}")
    with open(os.path.join(out_dir, "summary.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    plot(out_dir, f"GPT {next(iter(runs.values()))['params'] / 1e6:.0f}M on Python's sources")
    return "\n".join(lines)


def plot(out_dir, title):
    """OUT/loss.png from OUT/loss.csv (nothing without matplotlib): the train loss as a mean of 50
    steps and the validation loss, per recipe."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    train, val = {}, {}
    with open(os.path.join(out_dir, "loss.csv")) as fh:
        for row in csv.DictReader(fh):
            train.setdefault(row["recipe"], []).append((int(row["step"]), float(row["train_loss"])))
            if row["val_loss"]:
                val.setdefault(row["recipe"], []).append((int(row["step"]), float(row["val_loss"])))
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    lo_t = lo_v = float("inf")
    for name, pts in train.items():
        v = [b for _, b in pts]
        k = 50
        sm = [sum(v[max(0, i - k + 1):i + 1]) / (i - max(0, i - k + 1) + 1) for i in range(len(v))]
        lo_t = min(lo_t, min(sm))
        axes[0].plot([a for a, _ in pts], sm, label=name, lw=1.2)
        lo_v = min(lo_v, min(b for _, b in val[name]))
        axes[1].plot([a for a, _ in val[name]], [b for _, b in val[name]], label=name, marker=".", lw=1.2)
    axes[0].set(title="train loss (mean of 50 steps)", xlabel="step", ylabel="cross-entropy (nats / byte)")
    axes[1].set(title="validation loss", xlabel="step")
    for ax, lo in ((axes[0], lo_t), (axes[1], lo_v)):
        ax.set_ylim(lo - 0.05, lo + 1.0)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"blockcast recipes vs bf16: {title}")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "loss.png"), dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory for loss.csv, loss.png, summary.md")
    ap.add_argument("--recipes", default="bf16,fp8_current,fp8_delayed,fp8_blockwise,mxfp8,nvfp4",
                    help="comma-separated: bf16 and names of blockcast.torch.RECIPES")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--val-batches", type=int, default=16)
    ap.add_argument("--text-bytes", type=int, default=16 << 20)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--replot", metavar="TITLE", help="only redraw OUT/loss.png from OUT/loss.csv")
    cfg = ap.parse_args(argv)
    if cfg.replot:
        return plot(cfg.out, cfg.replot)
    if not torch.cuda.is_available():
        sys.exit("train_gpt.py needs a CUDA GPU")
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device("cuda")
    text, where = load_text(cfg.text_bytes)
    cfg.text_bytes = len(text)
    tok = torch.frombuffer(bytearray(text), dtype=torch.uint8)
    cut = int(tok.numel() * 0.9)
    runs = {}
    for name in cfg.recipes.split(","):
        if name != "bf16":
            bct.get_recipe(name)
        runs[name] = train(name, cfg, tok[:cut], tok[cut:], dev, log=lambda s: print(s, flush=True))
        print(f"{name}: {runs[name]['tokens_per_s']:,.0f} tokens/s", flush=True)
    print(write_results(runs, cfg, where, cfg.out))


if __name__ == "__main__":
    main()
