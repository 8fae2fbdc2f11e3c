"""KittenLinear: nn.Linear whose input is kept for backward as the core's compact copy.

For y = x·Wᵀ + b, backward needs x only for dW = dyᵀ·x; dx = dy·W does not use it. So
forward (torch) hands x to a keeper of the core's policy (core/kittens/) — an 8- or 4-bit
copy with one scale per row, or low-rank factors, or x itself when exact — and autograd
keeps no tensor of x. Backward: dx = dy·W in torch, exactly as nn.Linear; dW = (X̃ᵀ·dy)ᵀ
from the copy, computed by the core; db = Σ dy.

On a CUDA device the core computes in x's dtype (float32 or bfloat16): the keeper reads x and
dy in torch's memory (no copy through the host) and writes dW (float32) into a torch tensor,
ordered with torch's current stream; dW is cast to the weight's dtype.

Bounds (bits=8, nearest rounding): each row t of x is kept as codes·s_t with
s_t = max|x_t|/127 and |x − x̃| ≤ s_t/2 elementwise, so
|dW − dW_exact|[o, i] ≤ Σ_t |dy[t, o]|·s_t/2 (4 bits: 7 instead of 127; stochastic: s_t).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from .kitten_policy import KittenPolicy


class _KittenLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, keeper):
        y = F.linear(x, weight, bias)
        keeper.save(x.reshape(-1, x.shape[-1]))  # (n, in): copied into the core's keeper
        ctx.keeper = keeper
        ctx.x_shape = x.shape
        ctx.has_bias = bias is not None
        ctx.save_for_backward(weight)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy):
        (weight,) = ctx.saved_tensors
        keeper, ctx.keeper = ctx.keeper, None  # the core frees its copy in weight_grad
        dy2 = dy.reshape(-1, dy.shape[-1])  # (n, out)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = dy2.mm(weight).view(ctx.x_shape)  # (n, in): what nn.Linear computes
        if keeper is None:
            raise RuntimeError("KittenLinear: backward twice through one call (the saved copy is used up, "
                               "as torch's saved tensors are without retain_graph=True)")
        dw = keeper.weight_grad(dy2).t()  # core: X̃ᵀ·dy (in, out) → (out, in)
        if dw.dtype != weight.dtype:
            dw = dw.to(weight.dtype)  # a GPU's dW is float32 (bfloat16 weights)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = dy2.sum(0)
        return dx, dw, db, None


class KittenLinear(nn.Module):
    """y = x·Wᵀ + b with the input kept for dW as the core's policy says.

    KittenLinear(in_features, out_features, bias=True, bits=8, rounding="nearest",
                 method="lowbit", rank=16, policy=None, layer=0, kind="linear.input", **settings)

    Without `policy`, the layer makes its own KittenPolicy(method, bits, rank, rounding,
    **settings); with one, it asks that shared policy at (layer, kind) — so one policy's rank
    schedule and per-kind overrides can drive a whole model (call policy.set_step(step) every
    step). Weights and initialisation are nn.Linear's (weight (out, in)); state dicts are
    interchangeable with nn.Linear. CPU tensors of float32 or float64 (the core's two builds);
    CUDA tensors of float32 or bfloat16 (lowbit and exact methods).

    last_relative_error: the last call's measured ‖x − x̃‖/‖x‖ (on a GPU reading it waits for the
    device, and the last call's keeper is held until the next call).
    """

    def __init__(self, in_features, out_features, bias=True, bits=8, rounding="nearest", method="lowbit",
                 rank=16, policy=None, layer=0, kind="linear.input", device=None, dtype=None, **settings):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features, **factory))
        self.bias = nn.Parameter(torch.empty(out_features, **factory)) if bias else None
        self.policy = policy if policy is not None else KittenPolicy(method=method, bits=bits, rank=rank,
                                                                     rounding=rounding, **settings)
        self.layer = layer
        self.kind = kind
        self.last_saved_bytes = 0  # what the last call's keeper holds (bytes)
        self._last_error = None  # the last call's ‖x − x̃‖/‖x‖, or on a GPU a function reading it
        self.reset_parameters()

    def reset_parameters(self):
        # nn.Linear's initialisation
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)

    @classmethod
    def from_linear(cls, linear, **kwargs):
        """A KittenLinear with `linear`'s weights (copied) and the given policy settings."""
        m = cls(linear.in_features, linear.out_features, bias=linear.bias is not None,
                device=linear.weight.device, dtype=linear.weight.dtype, **kwargs)
        with torch.no_grad():
            m.weight.copy_(linear.weight)
            if linear.bias is not None:
                m.bias.copy_(linear.bias)
        return m

    def forward(self, x):
        if not (torch.is_grad_enabled() and self.weight.requires_grad):
            return F.linear(x, self.weight, self.bias)  # no dW wanted: nothing to keep
        keeper = self.policy.make_keeper(x.dtype, self.layer, self.kind, x.device)
        y = _KittenLinearFunction.apply(x, self.weight, self.bias, keeper)
        self.last_saved_bytes = keeper.held_bytes
        # On a GPU the measurement stays there until asked for (reading it waits for the device).
        # (a function: copy.deepcopy shares it rather than copying the core's keeper)
        self._last_error = (lambda: keeper.relative_error) if x.is_cuda else keeper.relative_error
        return y

    @property
    def last_relative_error(self):
        """‖x − x̃‖/‖x‖ of the last call's copy (0 exact, -1 not measured; None before a call)."""
        e = self._last_error
        return e() if callable(e) else e

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, saved={self.policy.choice(self.layer, self.kind)!r}")
