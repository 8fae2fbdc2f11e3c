#!/usr/bin/env python3
"""Expert-parallel PyTorch peer of the mok model: training throughput on two or more GPUs.

The model is the one of bench_pytorch_peers.py (imported from it: build_model, the shapes,
the optimizer, the batches); only its MoE layers are replaced by an expert-parallel layer,
the classic way, one process per GPU (torchrun, NCCL):
  - rank r of R holds experts [r*E/R, (r+1)*E/R) (contiguous blocks); the dense weights
    (attention, norms, router, embedding) are replicated and their gradients averaged by
    DistributedDataParallel (default buckets and overlap; the expert weights are left out
    of it); expert gradients stay local (scaled by 1/R, so that the step is the one of the
    global batch: every rank's loss is the mean over its own tokens);
  - each MoE layer routes its rank's tokens (fp32 softmax, top-k, renormalised gates); the
    load-balancing fractions f_e are global (an all-reduce of E + 1 counts, as in the core),
    so aux and z losses equal the single-GPU peer's on the global batch;
  - pairs sorted by expert (= by destination rank, then expert); the counts per (rank,
    expert) are exchanged with all_to_all_single on a small int64 tensor and copied to the
    host (the one host sync per layer: the split sizes); token rows go out with
    all_to_all_single(input/output split sizes), are regrouped expert-major, run through the
    local experts with one torch._grouped_mm per projection (offs = cumsum of the received
    counts), regrouped back and returned with the reverse all_to_all_single; gated combine.
  - the exchange is AllToAll below, a torch.autograd.Function of our own whose backward is
    the reverse all_to_all_single (torch.distributed.nn.functional is not used).
  - global grad-norm clip 1.0 over all parameters (the expert part of the squared norm is
    all-reduced), AdamW as in the peers, bf16 autocast over fp32 master weights.

Variants
  ep            eager
  ep-compiled   torch.compile on each block and on the loss head (--compile-scope block) or on
                the whole model (model); the exchange is excluded from compilation
                (torch._dynamo.disable: a graph break in each MoE layer)
Each (shape, variant) runs in child processes of the torchrun ranks (one per rank, a process
group of its own), so that a failure or a hang of one variant cannot spoil the others; a
variant that fails is reported with its message.

Measured: `--warmup` steps (compilation happens there), a barrier, then `--steps` timed steps
between CUDA events on every rank. tokens/s = R * batch * seq * steps / the slowest rank's
timed seconds (all GPUs together); step ms = median over steps of the slowest rank's step.
Peak memory per GPU: torch.cuda.max_memory_allocated over the timed steps, the largest rank.
Bytes between GPUs per step (all ranks, both directions, forward and backward), as the core's
comm/remote_bytes: token rows sent to other ranks (from the split sizes, times the row bytes
on the wire), the count exchanges, and the gradient all-reduce modelled as a ring
(2 (R-1)/R of the buffer sent per rank: fp32 dense gradients, the aux counts, the clip norm).

    torchrun --standalone --nproc_per_node 2 tools/gpu/bench_pytorch_ep.py --shapes moe8,moe64 \\
        --steps 10 --warmup 3 --json out/ep.json
    torchrun --standalone --nproc_per_node 2 tools/gpu/bench_pytorch_ep.py --device cpu --shapes tiny \\
        --steps 2 --warmup 1
    torchrun --standalone --nproc_per_node 2 tools/gpu/bench_pytorch_ep.py --self-check

--self-check (CPU, gloo, fp32): the expert-parallel MoE layer against the single-process MoE
layer of the peers on the same global batch and weights (outputs, router losses, gradients
of inputs, router and experts), and one training step of the whole expert-parallel model
(DDP, scaling, clip) against the single-process model on the global batch; asserts 1e-5
relative. Without torch._grouped_mm (older PyTorch) the experts run as a per-expert loop,
marked "fallback: loop" in the output. It is a benchmark: it never passes or fails on figures.
"""

import os

# NVLink multicast must stay off on the GPU machines; set before torch loads.
os.environ["NCCL_NVLS_ENABLE"] = "0"

import argparse
import dataclasses
import datetime
import json
import math
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_pytorch_peers as peers  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

VARIANTS = ("ep", "ep-compiled")
GROUPED_MM = getattr(torch, "_grouped_mm", None)


# --------------------------------------------------------------------------------------
# The exchange
# --------------------------------------------------------------------------------------

class Tally:
    """Bytes this rank sends to other ranks (host integers, counted while `on`)."""

    def __init__(self):
        self.on = False
        self.rows = 0      # token rows and their gradients
        self.control = 0   # count exchanges, modelled all-reduces

    def add_rows(self, n):
        if self.on:
            self.rows += n

    def add_control(self, n):
        if self.on:
            self.control += n


def ring_all_reduce_bytes(nbytes, world):
    """Bytes one rank sends in a ring all-reduce of `nbytes`: 2 (R-1)/R of the buffer."""
    return 2 * (world - 1) * nbytes // world if world > 1 else 0


class AllToAll(torch.autograd.Function):
    """all_to_all_single of rows with uneven splits; its backward is the reverse exchange.
    x (sum(in_splits), d) -> (sum(out_splits), d). Gloo has no bf16: rows travel as fp32 there."""

    @staticmethod
    def forward(ctx, x, out_splits, in_splits, group, tally, upcast):
        ctx.meta = (out_splits, in_splits, group, tally, upcast)
        return AllToAll.exchange(x, out_splits, in_splits, group, tally, upcast)

    @staticmethod
    def backward(ctx, grad):
        out_splits, in_splits, group, tally, upcast = ctx.meta
        return AllToAll.exchange(grad, in_splits, out_splits, group, tally, upcast), None, None, None, None, None

    @staticmethod
    def exchange(x, out_splits, in_splits, group, tally, upcast):
        dtype = x.dtype
        wire = x.float() if upcast and dtype in (torch.bfloat16, torch.float16) else x
        wire = wire.contiguous()
        out = wire.new_empty((sum(out_splits),) + tuple(wire.shape[1:]))
        dist.all_to_all_single(out, wire, out_splits, in_splits, group=group)
        me = dist.get_rank(group)
        row_bytes = math.prod(wire.shape[1:]) * wire.element_size()
        tally.add_rows((sum(in_splits) - in_splits[me]) * row_bytes)
        return out.to(dtype)


def disable_compile(fn):
    """fn excluded from torch.compile (a graph break), where torch._dynamo exists."""
    try:
        import torch._dynamo as dynamo
        return dynamo.disable(fn)
    except (ImportError, AttributeError):
        return fn


def loop_experts(x, counts, w_up, w_down):
    # x (M, d) rows grouped by local expert; counts: host list (E_loc); w_up (E_loc, d, 2f)
    outs, start = [], 0
    for e, c in enumerate(counts):
        if c:
            gate, up = (x[start:start + c] @ w_up[e]).chunk(2, dim=-1)
            outs.append((F.silu(gate) * up) @ w_down[e])
        start += c
    return torch.cat(outs) if outs else x.new_zeros((0, w_down.shape[-1]))


def grouped_experts(x, counts_dev, w_up, w_down):
    # x (M, d) rows grouped by local expert; counts_dev (E_loc) int64 on the device
    offs = counts_dev.cumsum(0).to(torch.int32)                   # (E_loc) end of each expert's rows
    a = GROUPED_MM(x, w_up.to(x.dtype), offs=offs)                # (M, 2f)
    gate, up = a.chunk(2, dim=-1)
    return GROUPED_MM(F.silu(gate) * up, w_down.to(x.dtype), offs=offs)  # (M, d)


class ExpertParallelMoE(nn.Module):
    """The peers' MoE layer with its experts spread over the ranks of `group`. Takes the
    router of `moe` (shared) and copies this rank's block of its experts."""

    def __init__(self, moe, s, group, expert_dtype, impl, tally):
        super().__init__()
        self.s, self.group, self.expert_dtype, self.tally = s, group, expert_dtype, tally
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        if s.experts % self.world:
            raise ValueError(f"{s.experts} experts do not split over {self.world} ranks")
        self.local = s.experts // self.world
        lo = self.rank * self.local
        self.w_router = moe.w_router                                                  # (E, d), replicated
        self.w_up = nn.Parameter(moe.w_up.detach()[lo:lo + self.local].clone())      # (E_loc, d, 2f)
        self.w_down = nn.Parameter(moe.w_down.detach()[lo:lo + self.local].clone())  # (E_loc, f, d)
        self.grouped = impl == "grouped" and GROUPED_MM is not None
        self.upcast = dist.get_backend(group) == "gloo"
        self._exchange = disable_compile(self._exchange_and_experts)

    def forward(self, x):
        # x (B, S, d) -> (B, S, d), router losses (scalar; global f_e, this rank's tokens)
        E, k = self.s.experts, self.s.top_k
        shape, d = x.shape, x.shape[-1]
        x = x.reshape(-1, d)                                       # (N, d)
        n = x.shape[0]
        with torch.autocast(x.device.type, enabled=False):
            logits = x.float() @ self.w_router.t()                 # (N, E) fp32
            probs = logits.softmax(-1)
            lse = torch.logsumexp(logits, -1)                      # (N)
        top_p, top_e = probs.topk(k, dim=-1)                       # (N, k)
        gates = top_p / top_p.sum(-1, keepdim=True)
        flat_e = top_e.reshape(-1)                                 # (N k)
        counts = torch.zeros(E + 1, dtype=torch.int64, device=x.device)
        counts.scatter_add_(0, flat_e, torch.ones_like(flat_e))    # (E) pairs per expert, then n
        counts[E] = n
        order = torch.sort(flat_e, stable=True).indices            # by destination rank, then expert
        x_sorted = x.to(self.expert_dtype)[order // k]             # (N k, d)
        y_sorted, total = self._exchange(x_sorted, counts)
        fraction = total[:E].to(torch.float32) / (total[E].to(torch.float32) * k)  # global f_e
        aux = 0.01 * E * (fraction * probs.mean(0)).sum()
        z = 0.001 * lse.pow(2).mean()
        inverse = torch.empty_like(order).scatter_(0, order, torch.arange(order.numel(), device=x.device))
        y_pairs = y_sorted[inverse].view(n, k, d)                  # (token, slot) order
        y = (y_pairs * gates.unsqueeze(-1)).sum(1)
        return y.view(shape), aux + z

    def _exchange_and_experts(self, x_sorted, counts):
        # x_sorted (P, d) pairs in expert order; counts (E + 1) int64: pairs per expert, tokens
        R, El, g, E = self.world, self.local, self.group, self.s.experts
        total = counts.clone()
        dist.all_reduce(total, group=g)                            # (E + 1) global, for the aux loss
        self.tally.add_control(ring_all_reduce_bytes(total.numel() * 8, R))
        send = counts[:E].contiguous()                             # (R * El): [dest rank, expert]
        recv = torch.empty_like(send)                              # (R * El): [source rank, my expert]
        dist.all_to_all_single(recv, send, group=g)
        self.tally.add_control((R - 1) * El * 8)
        host = torch.cat([send, recv]).tolist()                    # the one host sync of the layer
        send_h, recv_h = host[:E], host[E:]
        send_splits = [sum(send_h[r * El:(r + 1) * El]) for r in range(R)]
        recv_splits = [sum(recv_h[r * El:(r + 1) * El]) for r in range(R)]
        per_expert_h = [sum(recv_h[r * El + e] for r in range(R)) for e in range(El)]
        m = sum(recv_splits)
        x_recv = AllToAll.apply(x_sorted, recv_splits, send_splits, g, self.tally, self.upcast)  # (M, d)
        # source-major -> expert-major: the local expert of each received row, stable sort
        local_ids = torch.arange(El, device=x_sorted.device).repeat(R)  # (R * El)
        expert_of_row = torch.repeat_interleave(local_ids, recv, output_size=m)
        perm = torch.sort(expert_of_row, stable=True).indices       # (M)
        h = x_recv[perm]
        if m == 0:
            out = h.new_zeros((0, x_sorted.shape[1]))
        elif self.grouped:
            out = grouped_experts(h, recv.view(R, El).sum(0), self.w_up, self.w_down)
        else:
            out = loop_experts(h, per_expert_h, self.w_up, self.w_down)
        back = torch.empty_like(perm).scatter_(0, perm, torch.arange(m, device=perm.device))
        y_recv = out.to(x_sorted.dtype)[back]                      # (M, d) source-major again
        y_sorted = AllToAll.apply(y_recv, send_splits, recv_splits, g, self.tally, self.upcast)  # (P, d)
        return y_sorted, total


# --------------------------------------------------------------------------------------
# The expert-parallel model and its step
# --------------------------------------------------------------------------------------

def build_ep_model(s, impl, expert_dtype, group, tally):
    """The peers' model (same seed on every rank: identical dense weights) with each MoE
    layer replaced by ExpertParallelMoE. Returns (model, notes, expert parameters)."""
    torch.manual_seed(1234)
    model, notes = peers.build_model(torch, s, impl, expert_dtype=expert_dtype)
    experts = []
    for block in model.blocks:
        block.ffn = ExpertParallelMoE(block.ffn, s, group, expert_dtype, impl, tally)
        experts += [block.ffn.w_up, block.ffn.w_down]
    grouped = impl == "grouped" and GROUPED_MM is not None
    notes["expert_impl"] = ("torch._grouped_mm" if grouped else
                            "fallback: loop (torch._grouped_mm missing)" if impl == "grouped" else "python loop")
    return model, notes, experts


def wrap_dense(model, experts, device):
    """DDP over the dense weights (expert weights left out). Returns (module to call, note)."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    ids = {id(p) for p in experts}
    ignore = [n for n, p in model.named_parameters() if id(p) in ids]
    if not hasattr(DDP, "_set_params_and_buffers_to_ignore_for_model"):
        return model, "manual all-reduce (DDP cannot leave parameters out in this torch)"
    DDP._set_params_and_buffers_to_ignore_for_model(model, ignore)
    kw = {"device_ids": [device.index]} if device.type == "cuda" else {}
    return DDP(model, broadcast_buffers=False, **kw), "DDP (default buckets)"


def finish_grads(model, dense, experts, world, ddp_used, tally, group):
    """After backward: dense gradients averaged over ranks (by DDP, or here), expert gradients
    scaled by 1/R; then the global grad-norm clip 1.0. Returns the norm (a tensor)."""
    dense_g = [p.grad for p in dense if p.grad is not None]
    expert_g = [p.grad for p in experts if p.grad is not None]
    if not ddp_used and world > 1:
        flat = torch.cat([g.reshape(-1) for g in dense_g])
        dist.all_reduce(flat)
        flat /= world
        i = 0
        for g in dense_g:
            g.copy_(flat[i:i + g.numel()].view_as(g))
            i += g.numel()
    for g in expert_g:
        g.mul_(1.0 / world)
    dense_sq = squared_norm(dense_g, dense_g[0].device)
    expert_sq = squared_norm(expert_g, dense_g[0].device)
    dist.all_reduce(expert_sq, group=group)                      # shards: sum over ranks
    tally.add_control(ring_all_reduce_bytes(4, world))
    norm = (dense_sq + expert_sq).sqrt()
    coef = (1.0 / (norm + 1e-6)).clamp(max=1.0)                   # as clip_grad_norm_(max_norm=1)
    grads = dense_g + expert_g
    try:
        torch._foreach_mul_(grads, coef)
    except (AttributeError, TypeError, RuntimeError):
        for g in grads:
            g.mul_(coef.to(g.dtype))
    return norm


def squared_norm(grads, device):
    """Sum of squares of `grads` (fp32 scalar tensor)."""
    if not grads:
        return torch.zeros((), dtype=torch.float32, device=device)
    if hasattr(torch, "_foreach_norm"):
        return torch.stack(torch._foreach_norm(grads)).float().pow(2).sum()
    return torch.stack([g.float().pow(2).sum() for g in grads]).sum()


def dense_gradient_bytes(dense, world):
    """Bytes all ranks send for the dense gradient all-reduce of one step (fp32, ring)."""
    return world * ring_all_reduce_bytes(sum(p.numel() for p in dense) * 4, world)


# --------------------------------------------------------------------------------------
# One (shape, variant) on every rank
# --------------------------------------------------------------------------------------

def comm_device(device):
    return device if dist.get_backend() == "nccl" else torch.device("cpu")


def reduce_values(values, op, device):
    t = torch.tensor(values, dtype=torch.float64, device=comm_device(device))
    dist.all_reduce(t, op=op)
    return t.cpu().tolist()


def run_variant(s, variant, args, device):
    """Trains `variant` of shape `s` on this rank; every rank returns the same global row."""
    world, rank = dist.get_world_size(), dist.get_rank()
    row = {"device": str(device), "backend": dist.get_backend()}
    if device.type == "cuda":
        row["device_name"] = torch.cuda.get_device_name(device)
    compiled = variant == "ep-compiled"
    if compiled and not hasattr(torch, "compile"):
        raise RuntimeError(f"torch.compile is not available in torch {torch.__version__}")
    group = dist.new_group(list(range(world)))                 # the expert exchange's own communicator
    tally = Tally()
    model, notes, experts = build_ep_model(s, "grouped", torch.bfloat16, group, tally)
    row.update(notes)
    if row["backend"] == "gloo":
        row["wire"] = "bf16 rows sent as fp32 (gloo has no bf16)"
    model.to(device)
    ids = {id(p) for p in experts}
    dense = [p for p in model.parameters() if id(p) not in ids]
    if compiled:
        import torch._dynamo as dynamo
        for limit in ("recompile_limit", "cache_size_limit"):  # the name changed across versions
            if hasattr(dynamo.config, limit):
                setattr(dynamo.config, limit, max(64, getattr(dynamo.config, limit)))
        if args.compile_scope == "block":
            for i in range(len(model.blocks)):
                model.blocks[i] = torch.compile(model.blocks[i], mode=args.compile_mode)
            model.head = torch.compile(model.head, mode=args.compile_mode)
        row["compile"] = f"torch.compile scope={args.compile_scope} mode={args.compile_mode}, exchange excluded"
    step_model, row["dense_grads"] = wrap_dense(model, experts, device)
    ddp_used = step_model is not model
    if compiled and args.compile_scope == "model":
        step_model = torch.compile(step_model, mode=args.compile_mode)
    optimizer, row["optimizer"] = peers.make_optimizer(torch, model, device)
    batches = peers.make_batches(torch, s, args.warmup + args.steps, device, None, seed=1 + rank)

    def step(tokens, targets):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            objective, ce = step_model(tokens, targets)
        objective.backward()
        finish_grads(model, dense, experts, world, ddp_used, tally, group)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return ce.detach()

    def start_timing():
        dist.barrier()
        tally.on = True

    losses, row["warmup_s"], step_ms, timed_s = peers.run_timed_steps(torch, device, step, batches, args.warmup,
                                                                      args.steps, start_timing)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    tally.on = False

    # global figures: the slowest rank's times, bytes of all ranks, the largest peak
    slow = reduce_values(step_ms + [timed_s], dist.ReduceOp.MAX, device)
    step_ms_max, timed_s = slow[:-1], slow[-1]
    per_rank = [0.0] * world
    per_rank[rank] = float(peak)
    peaks = reduce_values(per_rank, dist.ReduceOp.SUM, device)
    ce = [float(x) for x in losses]
    sums = reduce_values([tally.rows / args.steps, tally.control / args.steps, ce[0], ce[-1]],
                         dist.ReduceOp.SUM, device)
    grad_bytes = dense_gradient_bytes(dense, world)
    tokens_per_s = world * s.batch * s.seq * args.steps / timed_s
    row.update({
        "status": "ok", "error": None,
        "tokens_per_s": tokens_per_s,
        "step_ms": statistics.median(step_ms_max),
        "peak_bytes_per_gpu": int(max(peaks)) if device.type == "cuda" else None,
        "peak_bytes_per_rank": [int(x) for x in peaks] if device.type == "cuda" else None,
        "bytes_between_gpus_per_step": int(sums[0] + sums[1] + grad_bytes),
        "token_row_bytes_per_step": int(sums[0]),
        "control_bytes_per_step": int(sums[1]),
        "dense_grad_bytes_per_step": grad_bytes,
        "first_ce": sums[2] / world, "last_ce": sums[3] / world,
        "parameters_per_rank": sum(p.numel() for p in model.parameters()),
        "mfu": peers.mfu(tokens_per_s, s),
    })
    if not all(math.isfinite(x) for x in ce):
        row["status"], row["error"] = "failed", "loss is not finite"
    return row


def base_row(s, variant, world):
    return {"shape": s.name, "variant": variant, "world_size": world, "status": "failed",
            "tokens_per_s": None, "step_ms": None, "peak_bytes_per_gpu": None,
            "bytes_between_gpus_per_step": None, "error": None,
            "experts": s.experts, "top_k": s.top_k, "expert_hidden": s.expert_hidden,
            "batch_per_gpu": s.batch, "global_batch": s.batch * world, "seq": s.seq,
            "layers": s.layers, "d_model": s.d_model, "torch": torch.__version__}


def pick_device(args):
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available to this PyTorch (use --device cpu)")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def worker(args):
    """Child of a torchrun rank: one (shape, variant) in a process group of its own (env://
    with MASTER_PORT set by the parent). Writes its row to --row-json."""
    s, variant = args.shape_list[0], args.variant_list[0]
    row = base_row(s, variant, int(os.environ.get("WORLD_SIZE", "1")))
    try:
        if variant == "ep-compiled" and not hasattr(torch, "compile"):  # every rank alike, before the group
            raise RuntimeError(f"torch.compile is not available in torch {torch.__version__}")
        device = pick_device(args)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                                timeout=datetime.timedelta(seconds=args.variant_timeout))
        row.update(run_variant(s, variant, args, device))
    except Exception as exc:  # noqa: BLE001 - every failure becomes a row
        traceback.print_exc()
        row["status"], row["error"] = "failed", peers.error_text(exc)
    with open(args.row_json, "w") as fh:
        json.dump(row, fh)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if row["status"] == "ok" else 1)  # no teardown: a peer may be stuck in a collective


def free_port():
    with socket.socket() as sk:
        sk.bind(("", 0))
        return sk.getsockname()[1]


def run_children(s, variant, args, log_dir):
    """Every rank starts its child for (s, variant) and watches it; ranks agree once a
    second (gloo) whether a child failed, so that the others are stopped, not left hanging.
    Returns this rank's row."""
    rank, world = dist.get_rank(), dist.get_world_size()
    box = [free_port() if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    fd, row_path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    env = dict(os.environ, MASTER_PORT=str(box[0]))
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)  # the child's rank 0 serves its own store
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--shapes", s.name, "--variants", variant,
           "--row-json", row_path, "--device", args.device, "--steps", str(args.steps), "--warmup",
           str(args.warmup), "--compile-scope", args.compile_scope, "--compile-mode", args.compile_mode,
           "--variant-timeout", str(args.variant_timeout)]
    if args.batch:
        cmd += ["--batch", str(args.batch)]
    if args.seq:
        cmd += ["--seq", str(args.seq)]
    log_path = os.path.join(log_dir, f"{s.name}_{variant}_rank{rank}.log")
    row = base_row(s, variant, world)
    start = time.perf_counter()
    with open(log_path, "w") as log:
        child = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        why = None
        while True:
            time.sleep(0.5)
            code = child.poll()
            mine_failed = code is not None and code != 0
            if code is None and time.perf_counter() - start > args.variant_timeout:
                why = f"timed out after {args.variant_timeout} s (--variant-timeout)"
                mine_failed = True
            state = torch.tensor([1.0 if mine_failed else 0.0, 1.0 if code is None else 0.0])
            dist.all_reduce(state)                      # [ranks failed, ranks still running]
            if state[0] > 0 and child.poll() is None:
                child.kill()
                child.wait()
                why = why or "stopped: another rank's process failed"
            if state[0] > 0 or state[1] == 0:
                break
    try:
        with open(row_path) as fh:
            text = fh.read()
        if text.strip():
            row = json.loads(text)
    except (OSError, ValueError):
        pass
    finally:
        os.unlink(row_path)
    if row.get("status") != "ok" and not row.get("error"):
        row["error"] = why or f"exited with {child.returncode} without a result; " + peers.last_lines(log_path)
    row["log"] = log_path
    return row


def merge_rows(rows):
    """One row from every rank's: rank 0's when all are ok, else rank 0's with every rank's
    error (the cause first where the others only followed it)."""
    if all(r.get("status") == "ok" for r in rows):
        return rows[0]
    errors = [(i, str(r["error"])) for i, r in enumerate(rows) if r.get("status") != "ok" and r.get("error")]
    follow = ("stopped:", "Connection reset", "Connection closed")
    errors.sort(key=lambda e: any(f in e[1] for f in follow))
    text = "; ".join(f"rank {i}: {e}" for i, e in errors) if len(rows) > 1 else (errors[0][1] if errors else "?")
    return dict(rows[0], status="failed", error=text[:600])


# --------------------------------------------------------------------------------------
# Self-check (CPU, gloo, fp32)
# --------------------------------------------------------------------------------------

def rel(a, b):
    """max |a - b| / max |b| (relative to the reference's largest entry)."""
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-30))


def self_check(tol=1e-5):
    world, rank = dist.get_world_size(), dist.get_rank()
    group = dist.new_group(list(range(world)))
    worst = 0.0
    torch.set_num_threads(1)

    def check(name, a, b):
        report(name, rel(a, b))

    def report(name, r):
        nonlocal worst
        worst = max(worst, r)
        bad = torch.tensor([0.0 if r <= tol else 1.0])
        dist.all_reduce(bad)                                        # every rank stops together
        ok = r <= tol
        if rank == 0 or not ok:
            print(f"  rank {rank} {name:<34} rel {r:.1e} {'ok' if ok else 'FAILED'}", flush=True)
        assert bad.item() == 0, (f"{name}: relative difference {r:.2e} on rank {rank}; above the "
                                 f"tolerance {tol:.0e} on {int(bad.item())} rank(s)")

    # 1. the layer: outputs, router losses and gradients against the peers' MoE on the
    #    global batch; objective J = sum(y * G) + router losses (the mean over ranks)
    for experts, top_k, n in ((8, 2, 40), (4, 3, 24), (2 * world, 1, 16)):
        s = dataclasses.replace(peers.SHAPES["tiny"], experts=experts, top_k=top_k, layers=1, seq=n, batch=1)
        if experts % world:
            continue
        for impl in ("loop", "grouped"):
            if rank == 0:
                print(f"layer: {experts} experts top-{top_k}, {n} tokens per rank, {world} ranks, {impl}"
                      + (" (fallback: loop)" if impl == "grouped" and GROUPED_MM is None else ""), flush=True)
            torch.manual_seed(7)
            ref_model, _ = peers.build_model(torch, s, impl, expert_dtype=torch.float32)
            ref = ref_model.blocks[0].ffn
            d = s.d_model
            xg = torch.randn(world * n, d) * 2.0                  # global batch, same on every rank
            gg = torch.randn(world * n, d)
            ep = ExpertParallelMoE(ref_model.blocks[0].ffn, s, group, torch.float32, impl, Tally())
            ref.w_router = nn.Parameter(ref.w_router.detach().clone())  # its own copy (ep shares the old)
            x_ref = xg.clone().requires_grad_(True)
            y_ref, rl_ref = ref(x_ref.view(1, world * n, d))
            ((y_ref.view(-1, d) * gg).sum() + rl_ref).backward()

            lo, hi = rank * n, (rank + 1) * n
            x_ep = xg[lo:hi].clone().requires_grad_(True)
            y_ep, rl_ep = ep(x_ep.view(1, n, d))
            ((y_ep.view(-1, d) * gg[lo:hi]).sum() + rl_ep / world).backward()
            router_grad = ep.w_router.grad.clone()
            dist.all_reduce(router_grad)                            # replicated weight: sum over ranks
            rl_mean = rl_ep.detach().clone()
            dist.all_reduce(rl_mean)
            rl_mean /= world
            e_lo, e_hi = rank * ep.local, (rank + 1) * ep.local
            check("output y", y_ep.detach().view(-1, d), y_ref.detach().view(-1, d)[lo:hi])
            check("router losses (mean over ranks)", rl_mean, rl_ref.detach())
            check("grad x", x_ep.grad, x_ref.grad[lo:hi])
            check("grad w_router (summed)", router_grad, ref.w_router.grad)
            check("grad w_up (local experts)", ep.w_up.grad, ref.w_up.grad[e_lo:e_hi])
            check("grad w_down (local experts)", ep.w_down.grad, ref.w_down.grad[e_lo:e_hi])

    # 2. one training step of the whole model: DDP over the dense part, expert gradients
    #    scaled by 1/R, global clip; against the single-process peer model on the global batch
    s = dataclasses.replace(peers.SHAPES["tiny"], seq=32, batch=2)
    if s.experts % world == 0:
        if rank == 0:
            print(f"model: tiny ({s.layers} layers, {s.experts} experts top-{s.top_k}), batch {s.batch} x "
                  f"{s.seq} per rank, {world} ranks: objective, clipped gradients, weights after AdamW", flush=True)
        tally = Tally()
        model, _, experts = build_ep_model(s, "grouped", torch.float32, group, tally)
        torch.manual_seed(1234)
        ref, _ = peers.build_model(torch, s, "loop", expert_dtype=torch.float32)
        g = torch.Generator().manual_seed(3)
        data = torch.randint(0, s.vocab, (world * s.batch, s.seq + 1), generator=g)
        mine = data[rank * s.batch:(rank + 1) * s.batch]
        step_model, _ = wrap_dense(model, experts, torch.device("cpu"))
        ids = {id(p) for p in experts}
        dense = [p for p in model.parameters() if id(p) not in ids]
        opt, _ = peers.make_optimizer(torch, model, torch.device("cpu"))
        ref_opt, _ = peers.make_optimizer(torch, ref, torch.device("cpu"))
        obj, _ = step_model(mine[:, :-1], mine[:, 1:])
        obj.backward()
        norm = finish_grads(model, dense, experts, world, step_model is not model, tally, group)
        ref_obj, _ = ref(data[:, :-1], data[:, 1:])
        ref_obj.backward()
        ref_norm = torch.nn.utils.clip_grad_norm_(list(ref.parameters()), 1.0)
        obj_mean = obj.detach().clone()
        dist.all_reduce(obj_mean)
        obj_mean /= world
        check("objective (mean over ranks)", obj_mean, ref_obj.detach())
        check("grad norm", norm.detach(), ref_norm.detach())
        opt.step()
        ref_opt.step()
        ref_params = dict(ref.named_parameters())
        worst_grad = worst_weight = ("", 0.0)
        for name, p in model.named_parameters():
            r_p = ref_params[name]
            if name.endswith("ffn.w_up") or name.endswith("ffn.w_down"):
                e_lo = rank * (s.experts // world)
                r_grad, r_val = r_p.grad[e_lo:e_lo + p.shape[0]], r_p.detach()[e_lo:e_lo + p.shape[0]]
            else:
                r_grad, r_val = r_p.grad, r_p.detach()
            worst_grad = max(worst_grad, (name, rel(p.grad, r_grad)), key=lambda t: t[1])
            worst_weight = max(worst_weight, (name, rel(p.detach(), r_val)), key=lambda t: t[1])
        report(f"clipped grads (worst {worst_grad[0]})", worst_grad[1])
        report(f"weights after AdamW (worst {worst_weight[0]})", worst_weight[1])
    dist.barrier()
    if rank == 0:
        print(f"self-check passed on {world} ranks: worst relative difference {worst:.1e} (tolerance {tol:.0e})")
    return 0


# --------------------------------------------------------------------------------------
# Table, JSON, main
# --------------------------------------------------------------------------------------

def print_table(rows):
    head = ("shape", "variant", "GPUs", "tokens/s (all)", "step ms", "peak GiB/GPU", "GB between GPUs/step",
            "CE first->last", "status")
    lines = []
    for r in rows:
        ok = r.get("status") == "ok"
        variant = r["variant"] + (" (fallback: loop)" if str(r.get("expert_impl", "")).startswith("fallback") else "")
        lines.append((r["shape"], variant, str(r["world_size"]),
                      f"{r['tokens_per_s']:,.0f}" if ok else "-",
                      f"{r['step_ms']:.1f}" if ok else "-",
                      peers.gib(r.get("peak_bytes_per_gpu")) if ok else "-",
                      f"{r['bytes_between_gpus_per_step'] / 1e9:.3f}" if ok else "-",
                      f"{r['first_ce']:.3f}->{r['last_ce']:.3f}" if ok else "-",
                      "ok" if ok else "FAILED: " + str(r.get("error", "?"))))
    widths = [max(len(h), *(len(x[i]) for x in lines)) if lines else len(h) for i, h in enumerate(head)]
    fmt = " | ".join("{:<%d}" % w for w in widths[:-1]) + " | {}"
    print(fmt.format(*head))
    print("-+-".join("-" * w for w in widths[:-1]) + "-+-" + "-" * 6)
    for x in lines:
        print(fmt.format(*x))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="moe8,moe64", help="comma list of MoE shapes of bench_pytorch_peers.py")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma list of ep, ep-compiled")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation happens here)")
    p.add_argument("--batch", type=int, default=0, help="sequences per step PER GPU (default: the shape's, 16)")
    p.add_argument("--seq", type=int, default=0, help="tokens per sequence (default: the shape's, 1024)")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cuda (NCCL) or cpu (gloo)")
    p.add_argument("--json", default="", metavar="PATH", help="rank 0 writes the rows here (a JSON list)")
    p.add_argument("--log-dir", default="", help="per-variant, per-rank logs (default: beside --json, or temp)")
    p.add_argument("--compile-scope", choices=("block", "model"), default="block",
                   help="ep-compiled: torch.compile each block and the loss head, or the whole model")
    p.add_argument("--compile-mode", default="default", help="torch.compile mode")
    p.add_argument("--variant-timeout", type=int, default=420, help="seconds per (shape, variant)")
    p.add_argument("--in-process", action="store_true", help="run the variants in the torchrun processes")
    p.add_argument("--self-check", action="store_true",
                   help="CPU (gloo, fp32) check of the expert-parallel layer and step against one process")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--row-json", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.shape_list = []
    for name in filter(None, args.shapes.split(",")):
        s = peers.SHAPES.get(name)
        if s is None or not s.moe:
            p.error(f"'{name}' is not a MoE shape (known: {', '.join(k for k, v in peers.SHAPES.items() if v.moe)})")
        args.shape_list.append(dataclasses.replace(s, batch=args.batch or s.batch, seq=args.seq or s.seq))
    args.variant_list = [v for v in args.variants.split(",") if v]
    for v in args.variant_list:
        if v not in VARIANTS:
            p.error(f"unknown variant '{v}' (known: {', '.join(VARIANTS)})")
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    if "RANK" not in os.environ:
        print("run under torchrun, e.g. torchrun --standalone --nproc_per_node 2 " + os.path.relpath(__file__),
              file=sys.stderr)
        return 2
    if args.self_check:
        dist.init_process_group("gloo")
        try:
            return self_check()
        except AssertionError as exc:
            print(f"SELF-CHECK FAILED: {exc}", flush=True)
            return 1

    if args.in_process:
        device = pick_device(args)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    else:
        dist.init_process_group("gloo")  # the ranks only watch their children; no GPU work here
    rank, world = dist.get_rank(), dist.get_world_size()
    log_dir = args.log_dir or (os.path.join(os.path.dirname(os.path.abspath(args.json)), "ep_logs")
                               if args.json else os.path.join(tempfile.gettempdir(), "ep_logs"))
    os.makedirs(log_dir, exist_ok=True)
    if rank == 0:
        print(f"expert-parallel PyTorch peer: {world} ranks ({args.device}), torch {torch.__version__}, "
              f"grouped_mm {'yes' if GROUPED_MM else 'no (fallback: loop)'}, "
              f"compile {'yes' if hasattr(torch, 'compile') else 'no'}; random byte tokens")
        for s in args.shape_list:
            print(f"shape {s.name}: {s.layers} layers, d {s.d_model}, {s.experts} experts of {s.expert_hidden} "
                  f"top-{s.top_k}, {s.experts // world} per rank; batch {s.batch} x {s.seq} per rank "
                  f"({s.batch * world} global)", flush=True)
    rows = []
    for s in args.shape_list:
        for variant in args.variant_list:
            t = time.perf_counter()
            if args.in_process:
                row = base_row(s, variant, world)
                try:
                    row.update(run_variant(s, variant, args, device))
                except Exception as exc:  # noqa: BLE001 - every failure becomes a row
                    traceback.print_exc()
                    row["status"], row["error"] = "failed", peers.error_text(exc)
            else:
                row = run_children(s, variant, args, log_dir)
            gathered = [None] * world
            dist.all_gather_object(gathered, row)
            row = merge_rows(gathered)
            row["wall_s"] = time.perf_counter() - t
            rows.append(row)
            if rank == 0:
                status = (f"{row['tokens_per_s']:,.0f} tokens/s" if row.get("status") == "ok"
                          else "FAILED: " + str(row.get("error")))
                print(f"  {s.name:<8} {variant:<12} {status}  ({row['wall_s']:.0f} s)", flush=True)
    if rank == 0:
        print()
        print_table(rows)
        print("tokens/s: all GPUs, timed steps only; GB between GPUs: token rows both ways, forward and "
              "backward, all ranks, + counts + dense gradient all-reduce (ring model)")
        if any(str(r.get("expert_impl", "")).startswith("fallback") for r in rows):
            print("note: rows marked 'fallback' ran the experts as a loop: torch._grouped_mm is missing here")
        if args.json:
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)
            print(f"wrote {args.json}")
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
