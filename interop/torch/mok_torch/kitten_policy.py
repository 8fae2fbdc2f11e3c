"""KittenPolicy: how linear layers keep their inputs for backward, decided by the core.

The settings are the experiment config's `kittens:` keys (docs/kittens.md), applied through
the core's own config parser and checks, and the decisions are the core's KittenPolicy
(core/kittens/kitten_policy.h): exact, lowbit (8/4-bit codes, one scale per row), sketch,
rsvd or subspace (low-rank factors) at the rank the schedule gives for the current step.

    policy = KittenPolicy(method="rsvd", rank=16, schedule="linear", final_rank=4,
                          total_steps=200, layers=4)
    policy.set_step(step)          # once per training step: rank schedules, fresh sketches
    policy.metrics()               # {"kittens/rank/layer0": 16.0, "kittens/error/layer0": 0.21, ...}

One policy may serve many layers (KittenLinear(layer=i, kind=...)); its rank schedule,
adaptive controllers and error figures are per layer index.
"""
import json

import torch

from . import _C

# The low-rank methods; "exact" keeps X itself (through the core's exact keeper).
METHODS = ("exact", "lowbit", "sketch", "rsvd", "subspace")


def _flow(value):
    """A Python value as a YAML flow node, the syntax of `mok ... --set key=value`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        items = (f"{k if isinstance(k, int) else json.dumps(str(k))}: {_flow(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return json.dumps(str(value))


def _place(device, dtype, who):
    """(device index, bf16) where the core computes for tensors of `dtype` on `device`: index -1
    for the CPU (float32 or float64); on a CUDA device float32 or bfloat16 (the core's GPU types)."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    if device.type == "cpu":
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{who}: on the CPU the core computes in float32 or float64, not {dtype}")
        return -1, False
    if device.type != "cuda":
        raise TypeError(f"{who}: CPU or CUDA tensors, not {device.type}")
    if dtype not in (torch.float32, torch.bfloat16):
        raise TypeError(f"{who}: on a GPU the core computes in float32 or bfloat16, not {dtype}")
    index = device.index if device.index is not None else torch.cuda.current_device()
    return index, dtype == torch.bfloat16


class KittenPolicy:
    """The core's KittenPolicy; one core object per element type used: the float core serves
    float32 (CPU and GPU) and bfloat16 (GPU), the double core float64 (CPU).

    method: exact | lowbit | sketch | rsvd | subspace. bits (lowbit): 8 or 4. rank (low-rank
    methods): the starting rank. rounding (lowbit): nearest | stochastic. layers: the layer
    indices 0..layers-1 it keeps schedules and errors for. total_steps: the horizon of the
    linear/cosine schedules. Any other `kittens:` key goes in **settings: schedule, min_rank,
    max_rank, final_rank, schedule_steps, step_every, step_factor, warmup_steps, target_error,
    refresh_every, power_iters, factor_bits, kinds={...}, layer_overrides={...} (the config's
    `kittens.layers` map). Unknown keys and bad values raise ValueError naming the key.
    """

    def __init__(self, method="lowbit", bits=8, rank=16, rounding="nearest", layers=1, seed=1234,
                 total_steps=1000, **settings):
        if method not in METHODS:
            raise ValueError(f"KittenPolicy: method {method!r} is not one of {', '.join(METHODS)}")
        if method == "exact":
            assignments = ["mode=exact"]
        else:
            assignments = ["mode=custom", f"method={method}", f"bits={bits}", f"rank={rank}",
                           f"rounding={rounding}"]
        for key, value in settings.items():
            key = "layers" if key == "layer_overrides" else key
            assignments.append(f"{key}={_flow(value)}")
        self.method = method
        self._args = (assignments, layers, seed, total_steps)
        self._cores = {}
        self._step = 0
        self._core(torch.float32)  # checks the settings now

    def _core(self, dtype):
        """The core policy for tensors of `dtype`, made on first use: float32 and bfloat16 share
        the float core's, float64 has the double core's."""
        if dtype not in (torch.float32, torch.float64, torch.bfloat16):
            raise TypeError(f"KittenPolicy: the core computes in float32, bfloat16 (GPU) or float64 (CPU), not {dtype}")
        dtype = torch.float64 if dtype == torch.float64 else torch.float32
        core = self._cores.get(dtype)
        if core is None:
            assignments, layers, seed, total_steps = self._args
            try:
                core = _C.KittenPolicy(assignments, layers, seed, total_steps, dtype == torch.float64)
            except ValueError as e:
                raise ValueError(f"KittenPolicy: {e}") from None
            core.set_step(self._step)
            self._cores[dtype] = core
        return core

    def make_keeper(self, dtype, layer, kind, device=None):
        """What one call of linear layer (layer, kind) keeps of its input, chosen now, for
        tensors of `dtype` on `device` (default: the CPU)."""
        index, bf16 = _place(device, dtype, "KittenLinear")
        try:
            return self._core(dtype).make_keeper(layer, kind, index, bf16)
        except ValueError as e:
            raise ValueError(f"KittenPolicy: {e}") from None

    def set_step(self, step):
        """Starts training step `step` (schedules, sketch redraws, adaptive ranks)."""
        self._step = step
        for core in self._cores.values():
            core.set_step(step)

    @property
    def step(self):
        return self._step

    def choice(self, layer=0, kind="linear.input"):
        """How (layer, kind) is kept at the current step, e.g. 'lowbit 8' or 'rsvd r=16'."""
        return self._core(torch.float32).choice(layer, kind)

    def metrics(self, dtype=torch.float32):
        """kittens/rank/layer<L> and kittens/error/layer<L>, as the trainer reports them."""
        return dict(self._core(dtype).metrics())

    def __deepcopy__(self, memo):
        # Shared like a config: a copied model's layers ask the same policy (and its step).
        return self

    def __repr__(self):
        return f"KittenPolicy({', '.join(self._args[0])})"
