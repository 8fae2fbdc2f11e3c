#!/usr/bin/env python3
"""PyTorch peers of the mok model: training throughput, MFU and peak memory on one GPU.

The same decoder-only transformer as core/model/ (docs/model.md), written in PyTorch:
pre-norm blocks, RMSNorm (eps 1e-5, weight only), fused qkv without bias, RoPE (theta
10000, element i of a head pairs with i + hd/2), causal SDPA, output projection, SwiGLU
with one fused [gate | up] projection (width 2f) and a down projection; MoE layers route
with a linear router (d -> E) whose softmax runs in fp32, top-k with renormalised gates,
load-balancing loss (coef 0.01) and z-loss (coef 0.001), dropless routed SwiGLU experts;
the output head is tied to the 256-byte embedding; final RMSNorm; mean cross-entropy.
Init: N(0, 0.02^2), output projections (wo, w_down) 0.02/sqrt(2*layers), norm gains 1.
Training step: bf16 autocast over fp32 master weights, AdamW (fused where available;
betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices but not on the embedding or the
norm gains, as in the core), global grad-norm clip 1.0, constant lr 3e-4.

Variants
  dense:  eager, compiled (torch.compile)
  MoE:    loop              eager; sort pairs by expert, one host sync for the counts, then
                            a Python loop of per-expert matmuls (reference only)
          grouped           eager; experts stacked (E, d, 2f) and (E, f, d), pairs sorted by
                            expert, one torch._grouped_mm per projection, offs = cumsum of
                            the counts (int32); no host sync
          grouped-compiled  the same under torch.compile
Each (shape, variant) runs in its own process by default, so that a crash, an out-of-memory
error or a device-side assert in one cannot spoil the others, and so that peak memory is
that variant's alone. A variant that raises is reported as failed with its message.

Measured: `--warmup` steps (compilation happens there and is excluded), then `--steps`
timed steps between CUDA events.  tokens/s = batch * seq * steps / timed seconds.
MFU = training_flops_per_token(shape) * tokens/s / 797e12 (the measured cuBLAS bf16 peak of
the H200); the formula is in training_flops_per_token below and is importable, so that the
project's own runs are scored the same way.  Peak memory: torch.cuda.max_memory_allocated
and max_memory_reserved over the timed steps (reset after the warm-up).

    python3 tools/gpu/bench_pytorch_peers.py --shapes dense,moe8,moe64 --json out/peers.json
    python3 tools/gpu/bench_pytorch_peers.py --device cpu --shapes tiny,tiny_dense --steps 2 --warmup 1

It is a benchmark: it prints figures and never passes or fails on them.
"""

import os

# NVLink multicast must stay off on the GPU machines (harmless on one GPU); set before torch loads.
os.environ["NCCL_NVLS_ENABLE"] = "0"

import argparse
import dataclasses
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

PEAK_BF16_FLOPS = 797e12  # FLOP/s: cuBLAS bf16 GEMM 8192^3 measured on one H200 (DESIGN.md)
VOCAB = 256               # byte tokens


@dataclasses.dataclass(frozen=True)
class ModelShape:
    name: str
    layers: int
    d_model: int
    heads: int
    seq: int
    batch: int
    dense_hidden: int = 0   # SwiGLU width f of dense layers (experts == 0)
    experts: int = 0        # 0 -> every layer dense
    top_k: int = 0
    expert_hidden: int = 0  # SwiGLU width f of one expert
    vocab: int = VOCAB

    @property
    def moe(self):
        return self.experts > 0


SHAPES = {
    "dense": ModelShape("dense", 12, 768, 12, 1024, 16, dense_hidden=2048),
    "moe8": ModelShape("moe8", 12, 768, 12, 1024, 16, experts=8, top_k=2, expert_hidden=1024),
    "moe64": ModelShape("moe64", 12, 768, 12, 1024, 16, experts=64, top_k=8, expert_hidden=256),
    # CPU checks of the script's logic (and of the parameter count against `mok train`)
    "tiny": ModelShape("tiny", 2, 64, 4, 64, 4, experts=8, top_k=2, expert_hidden=64),
    "tiny_dense": ModelShape("tiny_dense", 2, 64, 4, 64, 4, dense_hidden=128),
}

DENSE_VARIANTS = ("eager", "compiled")
MOE_VARIANTS = ("loop", "grouped", "grouped-compiled")
ALL_VARIANTS = DENSE_VARIANTS + MOE_VARIANTS


# --------------------------------------------------------------------------------------
# Counting: parameters and model FLOPs (reusable for the project's own runs)
# --------------------------------------------------------------------------------------

def parameter_count(s):
    """Every parameter of the model, as `mok train` reports it (tied head counted once)."""
    d, L = s.d_model, s.layers
    per_layer = 4 * d * d + 2 * d  # wqkv (d, 3d), wo (d, d), attn_norm, ffn_norm
    if s.moe:
        per_layer += d * s.experts + s.experts * 3 * d * s.expert_hidden
    else:
        per_layer += 3 * d * s.dense_hidden
    return s.vocab * d + L * per_layer + d  # embedding (= head), blocks, final_norm


def active_matmul_parameters(s):
    """Weights that one token multiplies by in a forward pass: the attention projections,
    the dense MLP or the router plus top_k experts, and the tied output head (d x vocab).
    The embedding lookup is not a matmul and is not counted."""
    d = s.d_model
    ffn = d * s.experts + s.top_k * 3 * d * s.expert_hidden if s.moe else 3 * d * s.dense_hidden
    return s.layers * (4 * d * d + ffn) + d * s.vocab


def training_flops_per_token(s):
    """Model FLOPs of one training step per token (forward + backward):
        6 * active_matmul_parameters + 6 * layers * seq * d_model
    6N: 2 FLOPs per multiply-add in the forward and twice that in the backward.
    Attention scores q.k and the weighted sum p.v cost 2 * 2 * seq * d per token and layer
    forward over all key positions; causal attention needs half of them (2 * seq * d), and
    forward + backward triple it: 6 * seq * d per token and layer. Recompute (e.g. flash
    attention's backward, activation checkpointing) is not counted: model FLOPs, not
    hardware FLOPs. Norms, RoPE, softmax, SwiGLU and the optimizer are not counted."""
    return 6 * active_matmul_parameters(s) + 6 * s.layers * s.seq * s.d_model


def mfu(tokens_per_s, s, peak_flops=PEAK_BF16_FLOPS):
    """Model-FLOPs utilisation: training_flops_per_token(s) * tokens/s / peak."""
    return training_flops_per_token(s) * tokens_per_s / peak_flops


FLOPS_FORMULA = ("MFU = (6 * active matmul parameters per token, tied head included, "
                 "+ 6 * layers * seq * d_model for causal attention) * tokens/s / 797e12")


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------

def is_brown_file_name(name):
    return len(name) == 4 and name[0] == "c" and "a" <= name[1] <= "r" and name[2:].isdigit()


def read_corpus_bytes(path, limit=64 << 20):
    """Bytes of a text file or of every non-hidden file under a folder (sorted), at most
    `limit`. Brown corpus files (ca01..cr09) lose their /TAG word tags, as in mok."""
    files = []
    if os.path.isfile(path):
        files = [path]
    elif os.path.isdir(path):
        for root, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            files += [os.path.join(root, n) for n in sorted(names) if not n.startswith(".")]
    else:
        raise FileNotFoundError(f"corpus '{path}' is neither a file nor a folder")
    out = bytearray()
    for f in files:
        with open(f, "rb") as fh:
            raw = fh.read()
        if is_brown_file_name(os.path.basename(f)):
            lines = raw.decode("utf-8", "replace").splitlines()
            raw = "".join(" ".join(w.rsplit("/", 1)[0] for w in ln.split()) + "\n"
                          for ln in lines if ln.split()).encode()
        out += raw
        if len(out) >= limit:
            break
    return bytes(out[:limit])


def make_batches(torch, s, count, device, corpus, seed):
    """`count` (tokens, targets) pairs of shape (batch, seq), int64 on `device`: random bytes,
    or windows of the corpus bytes at random offsets."""
    g = torch.Generator().manual_seed(seed)
    if corpus is None:
        rows = [torch.randint(0, s.vocab, (s.batch, s.seq + 1), generator=g) for _ in range(count)]
    else:
        data = torch.frombuffer(bytearray(corpus), dtype=torch.uint8).long()
        if data.numel() < s.seq + 2:
            raise ValueError(f"corpus holds {data.numel()} bytes, fewer than seq + 2 = {s.seq + 2}")
        span = torch.arange(s.seq + 1)
        rows = []
        for _ in range(count):
            starts = torch.randint(0, data.numel() - s.seq - 1, (s.batch,), generator=g)
            rows.append(data[starts[:, None] + span])
    return [(r[:, :-1].contiguous().to(device), r[:, 1:].contiguous().to(device)) for r in rows]


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------

def build_model(torch, s, moe_impl, expert_dtype=None):
    """moe_impl: "loop" or "grouped" (MoE shapes only); expert_dtype: the experts' input
    dtype (bf16 for training under autocast, fp32 for the check against mok).
    Returns (model, notes)."""
    import torch.nn as nn
    import torch.nn.functional as F

    notes = {}
    has_rms_norm = hasattr(F, "rms_norm")
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    grouped_mm = getattr(torch, "_grouped_mm", None)
    notes["rms_norm"] = "F.rms_norm" if has_rms_norm else "explicit"
    notes["attention"] = "F.scaled_dot_product_attention(is_causal)" if has_sdpa else "explicit (no SDPA)"
    if s.moe:
        if moe_impl == "grouped":
            notes["expert_impl"] = "torch._grouped_mm" if grouped_mm else "fallback: loop (torch._grouped_mm missing)"
        else:
            notes["expert_impl"] = "python loop over experts"

    expert_dtype = expert_dtype or torch.bfloat16
    d, H, hd, L = s.d_model, s.heads, s.d_model // s.heads, s.layers
    out_std = 0.02 / math.sqrt(2 * L)

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            if has_rms_norm:
                return F.rms_norm(x, (d,), self.weight, 1e-5)
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight

    def rope(x, cos, sin):
        # x (B, H, S, hd); element i pairs with i + hd/2; cos, sin (S, hd/2)
        half = x.shape[-1] // 2
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wqkv = nn.Linear(d, 3 * d, bias=False)  # row of qkv = [q | k | v], heads contiguous
            self.wo = nn.Linear(d, d, bias=False)

        def forward(self, x, cos, sin):
            B, S, _ = x.shape
            q, k, v = self.wqkv(x).view(B, S, 3, H, hd).unbind(2)   # each (B, S, H, hd)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, S, hd)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            if has_sdpa:
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                scores = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
                mask = torch.ones(S, S, dtype=torch.bool, device=x.device).triu(1)
                o = scores.masked_fill(mask, float("-inf")).softmax(-1).to(v.dtype) @ v
            return self.wo(o.transpose(1, 2).reshape(B, S, d))

    class SwiGLU(nn.Module):
        def __init__(self, f):
            super().__init__()
            self.w_up = nn.Linear(d, 2 * f, bias=False)    # [gate | up]
            self.w_down = nn.Linear(f, d, bias=False)

        def forward(self, x):
            gate, up = self.w_up(x).chunk(2, dim=-1)
            return self.w_down(F.silu(gate) * up)

    def loop_experts(x_sorted, counts, w_up, w_down):
        # x_sorted (P, d) pairs sorted by expert; counts (E); w_up (E, d, 2f); w_down (E, f, d)
        outs, start = [], 0
        for e, c in enumerate(counts.tolist()):  # the one host sync of this path
            if c:
                gate, up = (x_sorted[start:start + c] @ w_up[e]).chunk(2, dim=-1)
                outs.append((F.silu(gate) * up) @ w_down[e])
            start += c
        return torch.cat(outs)

    def grouped_experts(x_sorted, counts, w_up, w_down):
        offs = counts.cumsum(0).to(torch.int32)  # (E) end of each expert's rows
        a = grouped_mm(x_sorted, w_up.to(expert_dtype), offs=offs)             # (P, 2f)
        gate, up = a.chunk(2, dim=-1)
        return grouped_mm(F.silu(gate) * up, w_down.to(expert_dtype), offs=offs)  # (P, d)

    expert_fn = grouped_experts if (moe_impl == "grouped" and grouped_mm) else loop_experts

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            E, f = s.experts, s.expert_hidden
            self.w_router = nn.Parameter(torch.empty(E, d))
            self.w_up = nn.Parameter(torch.empty(E, d, 2 * f))
            self.w_down = nn.Parameter(torch.empty(E, f, d))

        def forward(self, x):
            # x (B, S, d) -> (B, S, d), router losses (scalar)
            E, k = s.experts, s.top_k
            shape = x.shape
            x = x.reshape(-1, d)                                   # (N, d)
            n = x.shape[0]
            with torch.autocast(x.device.type, enabled=False):
                logits = x.float() @ self.w_router.t()            # (N, E) fp32
                probs = logits.softmax(-1)
                lse = torch.logsumexp(logits, -1)                  # (N)
            top_p, top_e = probs.topk(k, dim=-1)                   # (N, k)
            gates = top_p / top_p.sum(-1, keepdim=True)
            flat_e = top_e.reshape(-1)                             # (N k) expert of each pair
            counts = torch.zeros(E, dtype=torch.int64, device=x.device).scatter_add_(
                0, flat_e, torch.ones_like(flat_e))                # (E) pairs per expert
            fraction = counts.to(torch.float32) / (n * k)          # f_e, no gradient
            aux = 0.01 * E * (fraction * probs.mean(0)).sum()
            z = 0.001 * lse.pow(2).mean()
            order = torch.sort(flat_e, stable=True).indices        # pairs in expert order
            x_sorted = x.to(expert_dtype)[order // k]              # (N k, d)
            y_sorted = expert_fn(x_sorted, counts, self.w_up, self.w_down)
            inverse = torch.empty_like(order).scatter_(0, order, torch.arange(order.numel(), device=x.device))
            y_pairs = y_sorted[inverse].view(n, k, d)              # back to (token, slot) order
            y = (y_pairs * gates.unsqueeze(-1)).sum(1)             # gated combine, no atomics
            return y.view(shape), aux + z

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn_norm = RMSNorm()
            self.attn = Attention()
            self.ffn_norm = RMSNorm()
            self.ffn = MoE() if s.moe else SwiGLU(s.dense_hidden)

        def forward(self, x, cos, sin):
            h = x + self.attn(self.attn_norm(x), cos, sin)
            if s.moe:
                y, router_loss = self.ffn(self.ffn_norm(h))
            else:
                y, router_loss = self.ffn(self.ffn_norm(h)), h.new_zeros(())
            return h + y, router_loss

    class LossHead(nn.Module):
        # final RMSNorm, logits against the tied embedding, mean cross-entropy
        def __init__(self):
            super().__init__()
            self.final_norm = RMSNorm()

        def forward(self, x, embedding, targets):
            logits = F.linear(self.final_norm(x), embedding)      # (B, S, V)
            return F.cross_entropy(logits.reshape(-1, s.vocab).float(), targets.reshape(-1))

    class PeerModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(s.vocab, d)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.head = LossHead()
            inv_freq = 10000.0 ** (-2.0 * torch.arange(hd // 2, dtype=torch.float64) / hd)
            angle = torch.outer(torch.arange(s.seq, dtype=torch.float64), inv_freq)  # (S, hd/2)
            self.register_buffer("cos", angle.cos().float(), persistent=False)
            self.register_buffer("sin", angle.sin().float(), persistent=False)

        def forward(self, tokens, targets):
            # tokens, targets (B, S) -> objective (CE + router losses), CE
            x = self.embed(tokens)
            router_loss = x.new_zeros(())
            for block in self.blocks:
                x, rl = block(x, self.cos, self.sin)
                router_loss = router_loss + rl
            ce = self.head(x, self.embed.weight, targets)
            return ce + router_loss, ce

    model = PeerModel()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() < 2:
                continue  # norm gains stay 1
            out_proj = name.endswith("wo.weight") or name.endswith("w_down.weight") or name.endswith("ffn.w_down")
            p.normal_(0.0, out_std if out_proj else 0.02)
    return model, notes


def make_optimizer(torch, model, device):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.dim() < 2 or name.startswith("embed.") else decay).append(p)
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    kw = dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    if device.type == "cuda":
        try:
            return torch.optim.AdamW(groups, fused=True, **kw), "AdamW fused"
        except (TypeError, RuntimeError):
            pass
    return torch.optim.AdamW(groups, **kw), "AdamW"


# --------------------------------------------------------------------------------------
# One (shape, variant) run
# --------------------------------------------------------------------------------------

def run_variant(s, variant, args):
    """Trains `variant` of shape `s`; returns a result row (dict). Raises on failure."""
    import torch

    device = torch.device(args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", 0)  # set_device and the memory queries need an index
    torch.manual_seed(1234)
    row = {"device": args.device}
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("CUDA is not available to this PyTorch")
        torch.cuda.set_device(device)
        row["device_name"] = torch.cuda.get_device_name(device)
        if args.device_memory_cap:
            total = torch.cuda.get_device_properties(device).total_memory
            fraction = min(1.0, args.device_memory_cap * (1 << 30) / total)
            torch.cuda.set_per_process_memory_fraction(fraction, device)
            row["memory_cap_gib"] = args.device_memory_cap
    compiled = variant.endswith("compiled")
    model, notes = build_model(torch, s, "loop" if variant == "loop" else "grouped")
    model.to(device)
    row.update(notes)
    if compiled:
        if not hasattr(torch, "compile"):
            raise RuntimeError(f"torch.compile is not available in torch {torch.__version__}")
        import torch._dynamo
        for limit in ("recompile_limit", "cache_size_limit"):  # the name changed across versions
            if hasattr(torch._dynamo.config, limit):
                setattr(torch._dynamo.config, limit, max(64, getattr(torch._dynamo.config, limit)))
        if args.compile_scope == "block":
            # one compiled graph per block kind (the blocks share code) and one for the head
            for i in range(len(model.blocks)):
                model.blocks[i] = torch.compile(model.blocks[i], mode=args.compile_mode)
            model.head = torch.compile(model.head, mode=args.compile_mode)
            step_model = model
        else:
            step_model = torch.compile(model, mode=args.compile_mode)
        row["compile"] = f"torch.compile scope={args.compile_scope} mode={args.compile_mode}"
    else:
        step_model = model
    optimizer, row["optimizer"] = make_optimizer(torch, model, device)
    params = list(model.parameters())
    try:
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        clip_kw = {"foreach": True}
    except TypeError:
        clip_kw = {}

    corpus = read_corpus_bytes(args.corpus) if args.corpus else None
    row["data"] = f"corpus bytes from {args.corpus}" if corpus else "random bytes (uniform over 256; throughput only)"
    batches = make_batches(torch, s, args.warmup + args.steps, device, corpus, seed=1)
    autocast_dtype = torch.bfloat16

    def step(tokens, targets):
        with torch.autocast(device.type, dtype=autocast_dtype):
            objective, ce = step_model(tokens, targets)
        objective.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, **clip_kw)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return ce.detach()

    losses, row["warmup_s"], step_ms, timed_s = run_timed_steps(torch, device, step, batches, args.warmup, args.steps)
    if device.type == "cuda":
        row["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
        row["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(device)

    ce = [float(x) for x in losses]
    tokens_per_s = s.batch * s.seq * args.steps / timed_s
    row.update({
        "status": "ok",
        "tokens_per_s": tokens_per_s,
        "step_ms_median": statistics.median(step_ms),
        "step_ms_min": min(step_ms),
        "mfu": mfu(tokens_per_s, s),
        "first_ce": ce[0],
        "last_ce": ce[-1],
        "parameters_module": sum(p.numel() for p in model.parameters()),
    })
    if row["parameters_module"] != parameter_count(s):
        row["warning"] = (f"module holds {row['parameters_module']} parameters, "
                          f"parameter_count() says {parameter_count(s)}")
    if not all(math.isfinite(x) for x in ce):
        row["status"] = "failed"
        row["error"] = "loss is not finite"
    return row


def run_timed_steps(torch, device, step, batches, warmup, steps, on_timed_start=None):
    """Runs `warmup` untimed steps, then `steps` timed ones: CUDA events around each step on a
    GPU, the host clock on the CPU. The peak-memory counters are reset after the warm-up and
    on_timed_start() (a barrier, a byte tally) runs just before the timed steps.
    Returns (losses of every step, warm-up seconds, ms of each timed step, timed seconds)."""
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    losses = []
    t0 = time.perf_counter()
    for i in range(warmup):
        losses.append(step(*batches[i]))
    sync()
    warmup_s = time.perf_counter() - t0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    if on_timed_start:
        on_timed_start()
    step_ms = []
    if device.type == "cuda":
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
        for i in range(steps):
            starts[i].record()
            losses.append(step(*batches[warmup + i]))
            ends[i].record()
        sync()
        step_ms = [a.elapsed_time(b) for a, b in zip(starts, ends)]
        timed_s = starts[0].elapsed_time(ends[-1]) / 1e3
    else:
        t_start = time.perf_counter()
        for i in range(steps):
            t = time.perf_counter()
            losses.append(step(*batches[warmup + i]))
            step_ms.append((time.perf_counter() - t) * 1e3)
        timed_s = time.perf_counter() - t_start
    return losses, warmup_s, step_ms, timed_s


def base_row(s, variant, args):
    return {
        "shape": s.name, "variant": variant, "status": "failed",
        "layers": s.layers, "d_model": s.d_model, "heads": s.heads, "seq": s.seq, "batch": s.batch,
        "dense_hidden": s.dense_hidden, "experts": s.experts, "top_k": s.top_k,
        "expert_hidden": s.expert_hidden, "vocab": s.vocab,
        "steps": args.steps, "warmup": args.warmup,
        "parameters": parameter_count(s),
        "active_matmul_parameters": active_matmul_parameters(s),
        "flops_per_token": training_flops_per_token(s),
    }


def error_text(exc):
    text = f"{type(exc).__name__}: {exc}".strip().replace("\n", " ")
    return text[:400]


# --------------------------------------------------------------------------------------
# Check against mok (CPU): the same parameter count, and the same validation loss from the
# same weights
# --------------------------------------------------------------------------------------

def read_mok_metric(db_path, run_id, name, step):
    """One metric value from mok's run store (SQLite), or None."""
    import sqlite3
    with sqlite3.connect(db_path) as db:
        got = db.execute("SELECT m.value FROM metrics m JOIN metric_names n ON n.id = m.name_id "
                         "WHERE m.run_id = ? AND n.name = ? AND m.step = ?", (run_id, name, step)).fetchone()
    return got[0] if got else None


def read_safetensors(torch, path):
    """{name: fp32 tensor} of a safetensors file (the F32 tensors mok writes)."""
    with open(path, "rb") as fh:
        blob = fh.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} is {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.float32).reshape(info["shape"])
    return out


def load_mok_weights(torch, model, s, tensors):
    """Copies mok's parameters (core/model names; a linear layer's W is (d_in, d_out)) into
    the peer (nn.Linear weights are (d_out, d_in); experts stacked (E, d, 2f), (E, f, d))."""
    peer = dict(model.named_parameters())
    left = dict(tensors)

    def take(name):
        return left.pop(name)

    def put(name, value):
        target = peer.pop(name)
        if tuple(target.shape) != tuple(value.shape):
            raise ValueError(f"{name}: peer shape {tuple(target.shape)}, mok gives {tuple(value.shape)}")
        with torch.no_grad():
            target.copy_(value)

    put("embed.weight", take("embed"))
    put("head.final_norm.weight", take("final_norm"))
    for layer in range(s.layers):
        m, q = f"layers.{layer}", f"blocks.{layer}"
        put(f"{q}.attn_norm.weight", take(f"{m}.attn_norm"))
        put(f"{q}.ffn_norm.weight", take(f"{m}.ffn_norm"))
        put(f"{q}.attn.wqkv.weight", take(f"{m}.attn.wqkv").t())
        put(f"{q}.attn.wo.weight", take(f"{m}.attn.wo").t())
        if s.moe:
            put(f"{q}.ffn.w_router", take(f"{m}.moe.w_router").t())
            put(f"{q}.ffn.w_up", torch.stack([take(f"{m}.moe.experts.{e}.w_up") for e in range(s.experts)]))
            put(f"{q}.ffn.w_down", torch.stack([take(f"{m}.moe.experts.{e}.w_down") for e in range(s.experts)]))
        else:
            put(f"{q}.ffn.w_up.weight", take(f"{m}.mlp.w_up").t())
            put(f"{q}.ffn.w_down.weight", take(f"{m}.mlp.w_down").t())
    if left or peer:
        raise ValueError(f"unmatched parameters: mok {sorted(left)}, peer {sorted(peer)}")


def check_text(seed, size):
    """Deterministic ASCII prose of `size` bytes (words of a fixed list)."""
    import random
    words = ("the of and to in a is that for it as was with be by on not he this are or his from at "
             "which but have an they you were her she there one all we their been has when who will "
             "more no if out so said what up its about into than them can only other new some could "
             "time these two may then do first any my now such like our over man me even most made").split()
    rng = random.Random(seed)
    out, length = [], 0
    while length < size:
        word = rng.choice(words) + ("\n" if len(out) % 12 == 11 else "")
        out.append(word)
        length += len(word) + 1
    return " ".join(out).encode()[:size]


def verify_against_mok(mok, shapes, workdir, steps=100):
    """For each shape: trains it `steps` steps with `mok train` on a two-document corpus whose
    second document is the whole validation split (batch windows of seq tokens, so one
    validation batch covers it exactly once), then loads mok's final checkpoint into the
    peer and computes that validation loss in fp32. Prints the parameter counts, mok's
    first-step training loss against ln 256, and both validation losses. Returns True when
    the counts are equal and the losses agree to 1e-5."""
    import torch

    ok = True
    for s in shapes:
        folder = os.path.join(workdir, s.name)
        corpus = os.path.join(folder, "corpus")
        os.makedirs(corpus, exist_ok=True)
        val_bytes = check_text(2, s.batch * s.seq + 1)
        with open(os.path.join(corpus, "a_train.txt"), "wb") as fh:
            fh.write(check_text(1, 64 * 1024))
        with open(os.path.join(corpus, "b_val.txt"), "wb") as fh:
            fh.write(val_bytes)
        model_keys = (f"layers: {s.layers}, d_model: {s.d_model}, heads: {s.heads}, experts: {s.experts}, "
                      f"top_k: {max(1, s.top_k)}, expert_hidden: {max(1, s.expert_hidden)}, "
                      f"dense_hidden: {max(1, s.dense_hidden)}")
        config = os.path.join(folder, "check.yaml")
        with open(config, "w") as fh:
            fh.write(f"""name: peer-check-{s.name}
seed: 1234
data:     {{corpus: {corpus}, tokenizer: byte, seq_len: {s.seq}, val_fraction: 0.5}}
model:    {{{model_keys}}}
train:    {{steps: {steps}, batch: {s.batch}, lr: 3.0e-3, warmup_steps: 0, schedule: constant, eval_every: {steps}, eval_batches: 1}}
kittens:  {{mode: exact}}
routing:  {{dispatcher: classic, policy: topk, capacity_factor: 0}}
parallel: {{device: cpu, ranks: 1, comm: local, threads: 2}}
logging:  {{db: {folder}/check.db, checkpoint_dir: {folder}/checkpoints, progress: false}}
""")
        proc = subprocess.run([mok, "train", config, "--json", "--quiet"], capture_output=True, text=True)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            print(f"{s.name}: mok train failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
            ok = False
            continue
        result = json.loads(lines[-1])
        first_loss = read_mok_metric(os.path.join(folder, "check.db"), result["run_id"], "train/loss", 1)

        model, _ = build_model(torch, s, "loop", expert_dtype=torch.float32)
        load_mok_weights(torch, model, s, read_safetensors(torch, os.path.join(result["checkpoint"], "model.safetensors")))
        data = torch.tensor(list(val_bytes), dtype=torch.int64)
        starts = torch.arange(s.batch) * s.seq                      # every window of the split once
        window = starts[:, None] + torch.arange(s.seq + 1)
        rows = data[window]
        with torch.no_grad():
            _, peer_val = model(rows[:, :-1], rows[:, 1:])
        peer_val = float(peer_val)
        counts_equal = result["parameters"] == parameter_count(s) == sum(p.numel() for p in model.parameters())
        losses_agree = abs(peer_val - result["val_loss"]) < 1e-5
        ok = ok and counts_equal and losses_agree
        print(f"{s.name}: parameters mok {result['parameters']:,}, peer {parameter_count(s):,} "
              f"({'equal' if counts_equal else 'DIFFERENT'}); "
              f"mok first-step loss {first_loss:.4f} (ln 256 = {math.log(256):.4f}); "
              f"validation loss after {steps} steps from mok's weights: mok {result['val_loss']:.6f}, "
              f"peer {peer_val:.6f} (|diff| {abs(peer_val - result['val_loss']):.1e}, "
              f"{'agree' if losses_agree else 'DIFFER'})")
    return ok


# --------------------------------------------------------------------------------------
# Comparison with mok's own runs (tools/gpu/bench_gpu.sh writes them)
# --------------------------------------------------------------------------------------

def mok_metric_rows(db_path, run_id, name):
    """[(step, value, wall_s)] of one metric of one run in mok's run store, in step order;
    wall_s is the run's wall clock when the step's row was written."""
    import sqlite3
    with sqlite3.connect(db_path) as db:
        return db.execute("SELECT m.step, m.value, m.wall_s FROM metrics m JOIN metric_names n ON n.id = m.name_id "
                          "WHERE m.run_id = ? AND n.name = ? ORDER BY m.step", (run_id, name)).fetchall()


def read_text(path):
    try:
        with open(path, errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def mok_row(s, mok_dir, warmup):
    """The row of `mok train` on shape s from mok_<shape>.{stdout,stderr,rc} and mok_runs.db
    in mok_dir. tokens/s counts the steps after the first `warmup` ones over their wall-clock
    time, as for the peers: each step's time is the wall clock between its metric row and the
    previous step's, so the host's work between steps counts (tokens_per_s_step_time leaves it
    out: perf/step_ms only). Steps whose row also holds validation figures (mok validates after
    its last step; the peers do not validate) are left out of that count, as their wall clock
    includes the validation. tokens_per_s_all_steps is mok's own figure."""
    base = os.path.join(mok_dir, f"mok_{s.name}")
    row = {"shape": s.name, "variant": "mok", "status": "failed", "parameters": parameter_count(s),
           "flops_per_token": training_flops_per_token(s)}
    rc_text, stdout, stderr = read_text(base + ".rc"), read_text(base + ".stdout"), read_text(base + ".stderr")
    if rc_text is None:
        row["error"] = "not run"
        return row
    result = None
    for line in reversed((stdout or "").strip().splitlines()):
        try:
            result = json.loads(line)
            break
        except ValueError:
            continue
    rc = int(rc_text.strip() or -1)
    if rc != 0 or not result or result.get("error"):
        why = (result or {}).get("error") or " | ".join(ln for ln in (stderr or "").strip().splitlines()[-3:])
        row["error"] = (f"exit {rc}: " + (why or "no message")).replace("\n", " ")[:400]
        return row
    tokens_per_step = s.batch * s.seq
    row.update({"status": "ok", "run_id": result.get("run_id"), "steps": result.get("steps"),
                "tokens_per_s_all_steps": result.get("tokens_per_s"),
                "peak_tracked_bytes": result.get("peak_bytes"),
                "parameters_mok": result.get("parameters"), "last_ce": result.get("train_loss")})
    db_path = os.path.join(mok_dir, "mok_runs.db")
    try:
        steps = mok_metric_rows(db_path, result["run_id"], "perf/step_ms")
        # rows with validation figures are written after the validation ran
        validated = {step for step, _, _ in mok_metric_rows(db_path, result["run_id"], "val/loss")}
        row["first_ce"] = read_mok_metric(db_path, result["run_id"], "train/loss", 1)
    except Exception as exc:  # noqa: BLE001 - fall back to mok's all-steps figure
        steps, validated, row["note"] = [], set(), f"run store unreadable ({error_text(exc)}); tokens/s over all steps"
    timed = [ms for step, ms, _ in steps if step > warmup]
    wall_of = {step: wall for step, _, wall in steps}
    walls = [wall_of[step] - wall_of[step - 1] for step, _, _ in steps
             if step > warmup and step - 1 in wall_of and step not in validated]
    if timed and sum(timed) > 0:
        row["tokens_per_s_step_time"] = tokens_per_step * len(timed) / (sum(timed) / 1e3)
        # no warm-up step to start the clock from (warmup 0): the step times alone
        row["tokens_per_s"] = (tokens_per_step * len(walls) / sum(walls) if walls and sum(walls) > 0
                               else row["tokens_per_s_step_time"])
        row["wall_steps"] = len(walls)
        row["step_ms_median"] = statistics.median(timed)
        row["timed_steps"] = len(timed)
    else:
        row["tokens_per_s"] = result.get("tokens_per_s") or 0.0
    row["mfu"] = mfu(row["tokens_per_s"], s)
    if row["parameters_mok"] != parameter_count(s):
        row["warning"] = f"mok reports {row['parameters_mok']} parameters, the peers {parameter_count(s)}"
    return row


def load_peer_files(paths):
    """The peers' rows of one or more peers.json files (several calls of a day: the best row
    per shape is then the best over all of them). With more than one file each row is tagged
    with the file it came from. Returns (rows, versions of the first file that has them)."""
    rows, versions = [], None
    for path in paths:
        try:
            with open(path) as fh:
                peers = json.load(fh)
        except (OSError, ValueError) as exc:
            print(f"no peer rows from {path} ({error_text(exc)})")
            continue
        for r in peers.get("rows", []):
            if len(paths) > 1:
                r = dict(r, source=path)
            rows.append(r)
        versions = versions or peers.get("versions")
    return rows, versions


def compare_with_mok(args):
    """Prints and writes the comparison of the peers' rows (args.compare: one peers.json or a
    comma list of them) with mok's runs."""
    paths = [x for x in args.compare.split(",") if x]
    peer_rows, versions = load_peer_files(paths)
    if not peer_rows:
        print("no peer rows; mok rows only")
    rows = []
    for s in args.shape_list:
        mine = [r for r in peer_rows if r["shape"] == s.name]
        if len(paths) > 1:  # only each shape's best row: the one the ratio is taken against
            mine = [r for r in mine if r.get("status") == "ok"]
            mine = [max(mine, key=lambda r: r["tokens_per_s"])] if mine else []
        best = max((r for r in mine if r.get("status") == "ok"), key=lambda r: r["tokens_per_s"], default=None)
        mok = mok_row(s, args.mok_dir, args.warmup)
        if best and mok["status"] == "ok":
            mok["best_pytorch_variant"] = best["variant"]
            mok["ratio_vs_best_pytorch"] = mok["tokens_per_s"] / best["tokens_per_s"]
        rows += mine + [mok]

    head = ("shape", "runner", "tokens/s", "MFU %", "peak alloc GiB", "peak rsvd GiB", "mok / best PyTorch", "status")
    table = []
    for r in rows:
        ok = r.get("status") == "ok"
        runner = "mok" if r["variant"] == "mok" else "PyTorch " + r["variant"]
        if r.get("source"):
            runner += f" (best of {len(paths)} files: {r['source']})"
        if str(r.get("expert_impl", "")).startswith("fallback"):
            runner += " (fallback: loop)"
        alloc = r.get("peak_allocated_bytes", r.get("peak_tracked_bytes"))
        ratio = r.get("ratio_vs_best_pytorch")
        table.append((r["shape"], runner,
                      f"{r['tokens_per_s']:,.0f}" if ok else "-",
                      f"{100 * r['mfu']:.1f}" if ok else "-",
                      gib(alloc) if ok else "-", gib(r.get("peak_reserved_bytes")) if ok else "-",
                      f"{ratio:.2f} (vs {r['best_pytorch_variant']})" if ratio else "-",
                      ("ok" if ok else "FAILED: " + r.get("error", "?")) + (f" [{r['warning']}]" if r.get("warning") else "")))
    widths = [max(len(h), *(len(x[i]) for x in table)) if table else len(h) for i, h in enumerate(head)]
    fmt = " | ".join("{:<%d}" % w for w in widths[:-1]) + " | {}"
    print(fmt.format(*head))
    print("-+-".join("-" * w for w in widths[:-1]) + "-+-" + "-" * 6)
    for x in table:
        print(fmt.format(*x))
    print("tokens/s: steps after the warm-up only, over their wall-clock time, for both. " + FLOPS_FORMULA + ".")
    print("peak memory: PyTorch max_memory_allocated / max_memory_reserved; mok: peak_bytes of its memory tracker.")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"what": "mok against its PyTorch peers", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                       "versions": versions, "peer_files": paths, "flops_formula": FLOPS_FORMULA,
                       "peak_flops": PEAK_BF16_FLOPS, "warmup_steps_left_out": args.warmup, "rows": rows},
                      fh, indent=1)
        print(f"wrote {args.json}")
    return 0


# --------------------------------------------------------------------------------------
# Orchestration, table, JSON
# --------------------------------------------------------------------------------------

def library_versions():
    try:
        import torch
    except ImportError as e:
        return {"torch": f"missing ({e})"}
    v = {"torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        v["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001 - absent in CPU builds
        v["cudnn"] = None
    try:
        v["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version()) if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001
        v["nccl"] = None
    v["grouped_mm"] = hasattr(torch, "_grouped_mm")
    v["compile"] = hasattr(torch, "compile")
    return v


def variants_for(s, requested):
    own = MOE_VARIANTS if s.moe else DENSE_VARIANTS
    return [v for v in requested if v in own]


def run_isolated(s, variant, args, log_dir):
    """Runs one (shape, variant) in a child process; returns its row."""
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as tmp:
        row_path = tmp.name
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--shapes", s.name, "--variants", variant,
           "--row-json", row_path] + forwarded_options(args)
    log_path = os.path.join(log_dir, f"{s.name}_{variant}.log")
    row = base_row(s, variant, args)
    try:
        with open(log_path, "w") as log:
            proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=args.variant_timeout)
        with open(row_path) as fh:
            text = fh.read()
        if text.strip():
            row = json.loads(text)
        else:
            row["error"] = f"worker exited with {proc.returncode} without a result; " + last_lines(log_path)
    except subprocess.TimeoutExpired:
        row["error"] = f"timed out after {args.variant_timeout} s (--variant-timeout); " + last_lines(log_path)
    finally:
        if os.path.exists(row_path):
            os.unlink(row_path)
    row["log"] = log_path
    return row


def last_lines(path, n=3):
    try:
        with open(path, errors="replace") as fh:
            lines = [ln.strip() for ln in fh if ln.strip()]
        return " | ".join(lines[-n:])[-400:]
    except OSError:
        return ""


def forwarded_options(args):
    out = ["--device", args.device, "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--compile-scope", args.compile_scope, "--compile-mode", args.compile_mode]
    if args.batch:
        out += ["--batch", str(args.batch)]
    if args.seq:
        out += ["--seq", str(args.seq)]
    if args.corpus:
        out += ["--corpus", args.corpus]
    if args.device_memory_cap:
        out += ["--device-memory-cap", str(args.device_memory_cap)]
    return out


def run_in_process(s, variant, args):
    row = base_row(s, variant, args)
    try:
        row.update(run_variant(s, variant, args))
    except Exception as exc:  # noqa: BLE001 - every failure becomes a row
        traceback.print_exc()
        row["status"] = "failed"
        row["error"] = error_text(exc)
    finally:
        release_device_memory(args)
    return row


def release_device_memory(args):
    """Between variants of one process: drop compiled graphs and cached device blocks, so the
    next variant's reserved memory is its own (the default one-process-per-variant needs none)."""
    import gc
    import torch
    gc.collect()
    if hasattr(torch, "_dynamo"):
        torch._dynamo.reset()
    if args.device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.empty_cache()


def gib(x):
    return f"{x / (1 << 30):.2f}" if isinstance(x, (int, float)) else "-"


def print_table(rows, out=sys.stdout):
    head = ("shape", "variant", "tokens/s", "step ms", "MFU %", "peak alloc GiB", "peak rsvd GiB",
            "CE first->last", "status")
    lines = []
    for r in rows:
        ok = r.get("status") == "ok"
        variant = r["variant"]
        if str(r.get("expert_impl", "")).startswith("fallback"):
            variant += " (fallback: loop)"
        lines.append((
            r["shape"], variant,
            f"{r['tokens_per_s']:,.0f}" if ok else "-",
            f"{r['step_ms_median']:.1f}" if ok else "-",
            f"{100 * r['mfu']:.1f}" if ok else "-",
            gib(r.get("peak_allocated_bytes")), gib(r.get("peak_reserved_bytes")),
            f"{r['first_ce']:.3f}->{r['last_ce']:.3f}" if "first_ce" in r else "-",
            "ok" if ok else "FAILED: " + r.get("error", "?"),
        ))
    widths = [max(len(h), *(len(ln[i]) for ln in lines)) if lines else len(h) for i, h in enumerate(head)]
    fmt = " | ".join("{:<%d}" % w for w in widths[:-1]) + " | {}"
    print(fmt.format(*head), file=out)
    print("-+-".join("-" * w for w in widths[:-1]) + "-+-" + "-" * 6, file=out)
    for ln in lines:
        print(fmt.format(*ln), file=out)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="dense,moe8,moe64", help=f"comma list of {', '.join(SHAPES)}")
    p.add_argument("--variants", default=",".join(ALL_VARIANTS),
                   help="comma list of eager, compiled (dense) and loop, grouped, grouped-compiled (MoE)")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (compilation happens here)")
    p.add_argument("--batch", type=int, default=0, help="sequences per step (default: the shape's, 16)")
    p.add_argument("--seq", type=int, default=0, help="tokens per sequence (default: the shape's, 1024)")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    p.add_argument("--device-memory-cap", type=float, default=0.0, metavar="GIB",
                   help="cap this process's device memory (torch.cuda.set_per_process_memory_fraction)")
    p.add_argument("--corpus", default="", metavar="PATH",
                   help="text file or folder to read bytes from (default: random bytes)")
    p.add_argument("--json", default="", metavar="PATH", help="write the rows and the set-up here")
    p.add_argument("--log-dir", default="", help="per-variant logs (default: beside --json, or a temp folder)")
    p.add_argument("--compile-scope", choices=("block", "model"), default="block",
                   help="torch.compile each block and the loss head (default) or the whole model")
    p.add_argument("--compile-mode", default="default", help="torch.compile mode")
    p.add_argument("--variant-timeout", type=int, default=600, help="seconds per (shape, variant) process")
    p.add_argument("--in-process", action="store_true", help="run every variant in this process")
    p.add_argument("--verify-against-mok", default="", metavar="MOK",
                   help="CPU check instead of the benchmark: train the shapes briefly with this mok "
                        "binary and compare parameter counts and validation loss (see verify_against_mok)")
    p.add_argument("--compare", default="", metavar="PEERS_JSON[,PEERS_JSON...]",
                   help="instead of running: compare the rows of PEERS_JSON with mok's runs in --mok-dir "
                        "(mok_<shape>.stdout/.stderr/.rc and mok_runs.db, as bench_gpu.sh writes them); "
                        "with several files (calls of one day), against each shape's best peer row of all")
    p.add_argument("--mok-dir", default="", help="folder of mok's runs for --compare")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--row-json", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.shape_list = []
    for name in filter(None, args.shapes.split(",")):
        if name not in SHAPES:
            p.error(f"unknown shape '{name}' (known: {', '.join(SHAPES)})")
        s = SHAPES[name]
        s = dataclasses.replace(s, batch=args.batch or s.batch, seq=args.seq or s.seq)
        args.shape_list.append(s)
    args.variant_list = [v for v in args.variants.split(",") if v]
    for v in args.variant_list:
        if v not in ALL_VARIANTS:
            p.error(f"unknown variant '{v}' (known: {', '.join(ALL_VARIANTS)})")
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        s, variant = args.shape_list[0], args.variant_list[0]
        row = run_in_process(s, variant, args)
        with open(args.row_json, "w") as fh:
            json.dump(row, fh)
        return 0

    if args.compare:
        return compare_with_mok(args)
    if args.verify_against_mok:
        with tempfile.TemporaryDirectory(prefix="peer_check_") as workdir:
            return 0 if verify_against_mok(args.verify_against_mok, args.shape_list, workdir) else 1

    log_dir = args.log_dir or (os.path.join(os.path.dirname(os.path.abspath(args.json)), "peer_logs")
                               if args.json else tempfile.mkdtemp(prefix="peer_logs_"))
    os.makedirs(log_dir, exist_ok=True)
    versions = library_versions()
    print("PyTorch peers of the mok model; "
          + ("random byte tokens (throughput only)" if not args.corpus else f"bytes of {args.corpus}"))
    print("libraries: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print(FLOPS_FORMULA)
    for s in args.shape_list:
        print(f"shape {s.name}: {s.layers} layers, d {s.d_model}, {s.heads} heads, seq {s.seq}, batch {s.batch}, "
              + (f"{s.experts} experts of {s.expert_hidden} top-{s.top_k}" if s.moe else f"SwiGLU {s.dense_hidden}")
              + f"; {parameter_count(s):,} parameters, {active_matmul_parameters(s):,} active matmul, "
              + f"{training_flops_per_token(s) / 1e6:.1f} MFLOP/token")
    sys.stdout.flush()

    rows = []
    for s in args.shape_list:
        for variant in variants_for(s, args.variant_list):
            t = time.perf_counter()
            row = run_in_process(s, variant, args) if args.in_process else run_isolated(s, variant, args, log_dir)
            row["wall_s"] = time.perf_counter() - t
            rows.append(row)
            status = (f"{row['tokens_per_s']:,.0f} tokens/s" if row.get("status") == "ok"
                      else "FAILED: " + row.get("error", "?"))
            print(f"  {s.name:<10} {variant:<16} {status}  ({row['wall_s']:.0f} s)", flush=True)

    print()
    print_table(rows)
    if any(r.get("expert_impl", "").startswith("fallback") for r in rows):
        print("note: rows marked 'fallback' ran the experts as a loop: torch._grouped_mm is missing here")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        doc = {
            "what": "PyTorch peers of the mok model (tools/gpu/bench_pytorch_peers.py)",
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "argv": sys.argv,
            "versions": versions,
            "peak_flops": PEAK_BF16_FLOPS,
            "flops_formula": FLOPS_FORMULA,
            "rows": rows,
        }
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
