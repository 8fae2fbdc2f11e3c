"""MoKMoE: the core's mixture-of-experts layer (core/model/moe_layer.h) as a torch module.

    x (..., d) → router: p = softmax(x·Wr) over E experts, top-k (ties to the lower index),
                 gates = p_chosen / Σ p_chosen; capacity factor c > 0 drops pairs beyond
                 ⌈c·n·k/E⌉ per expert in (token, slot) order
               → experts: y = Σ_slots gate · (silu(x·Wup[e][:, :f]) ∘ x·Wup[e][:, f:])·Wdown[e]
               (+ shared expert) → y (..., d)
    router_loss = aux + z: aux = aux_coef·E·Σ_e f_e·P_e (f_e: share of pairs routed to e, a
                  constant of the step; P_e: mean probability), z = z_coef·mean_t lse_t²

forward returns (y, router_loss); add router_loss to the objective (its gradient scales the
aux and z gradients, as the core's loss_scale). Forward and backward are the core's, on one
rank (expert parallelism over ranks is the trainer's, not this module's).

Parameters, in the core's layout (x·W, not nn.Linear's W·x): w_router (d, E), w_up
(E, d, 2f) = [gate | up] per expert, w_down (E, f, d), and with shared_expert
shared_w_up (d, 2f), shared_w_down (f, d). They are views of the core's own storage: the
optimizer's in-place updates are what the core computes with next (no copy). A parameter
whose storage was replaced (param.data = ..., load_state_dict(assign) …) is copied into the
core before each call. Inputs and output gradients are copied into the core once per call;
outputs and input gradients come back without a copy (torch tensors over the core's memory),
parameter gradients as one copy each (the core reuses its gradient buffers).

On a CUDA device (device="cuda", or .to("cuda") / .cuda()) the core layer lives on that GPU: its
parameters are float32 masters there and `dtype` is the compute dtype, float32 or bfloat16
(bfloat16: the core's bf16 compute copies, refreshed from the masters at every forward, so a
torch optimizer's in-place updates are what the next forward computes with). The input must be
of the compute dtype; y and dx come back in it, gradients in float32. x and dy are read in
torch's memory, y and dx are written into torch tensors (one device copy each), ordered with
torch's current stream. .to(torch.bfloat16) on a GPU layer switches it to bf16 compute (the
masters stay float32); on a move or a switch the core layer is rebuilt with the same values.

The core layer keeps one call's saved tensors: backward must follow its forward before the
next forward with gradients (the usual training step). Otherwise backward raises.
"""
import torch
from torch import nn

from . import _C
from .kitten_policy import _place


class _MoeFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, core, stats, x, *params):
        y, aux, z, load, dropped, call = core.forward(x, True)
        stats.update(aux_loss=aux, z_loss=z, load=load, dropped=dropped)
        ctx.core, ctx.call = core, call
        return y, x.new_tensor(aux + z)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy, dloss):
        loss_scale = float(dloss) if dloss is not None else 0.0
        dx = ctx.core.backward(dy, loss_scale, ctx.call)
        grads = [grad.clone() for _, _, grad in ctx.core.parameters()]
        return (None, None, dx, *grads)


class MoKMoE(nn.Module):
    """The core's MoE layer: MoKMoE(d_model, experts, expert_hidden, top_k=2, ...).

    shared_expert: an always-on SwiGLU beside the routed experts. aux_loss_coef, z_loss_coef:
    the router losses' weights. capacity_factor: 0 = dropless. init_std / out_std: the core's
    initialisation N(0, std²) by parameter name from `seed` (out_std for w_down; default
    init_std). policy: a KittenPolicy of the same dtype for the layer's saved tensors (router
    and expert inputs, SwiGLU pre-activations), `layer` its layer index. dtype: the compute
    dtype: float32 or float64 on the CPU (the core's two builds), float32 or bfloat16 on a
    CUDA device. device: where the layer lives (default the CPU).

    After each forward: last_load (pairs per expert), last_dropped, last_aux_loss, last_z_loss.
    """

    def __init__(self, d_model, experts, expert_hidden, top_k=2, shared_expert=False, aux_loss_coef=0.01,
                 z_loss_coef=0.001, capacity_factor=0.0, init_std=0.02, out_std=None, seed=1234, policy=None,
                 layer=0, dtype=torch.float32, device=None):
        super().__init__()
        device = torch.device(device) if device is not None else torch.device("cpu")
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        self._settings = dict(d_model=d_model, experts=experts, expert_hidden=expert_hidden, top_k=top_k,
                              shared_expert=shared_expert, aux_loss_coef=aux_loss_coef, z_loss_coef=z_loss_coef,
                              capacity_factor=capacity_factor, init_std=init_std, out_std=out_std, seed=seed,
                              policy=policy, layer=layer, dtype=dtype, device=device)
        index, bf16 = _place(device, dtype, "MoKMoE")
        core_policy = policy._core(dtype) if policy is not None else None
        self._core = _C.MoeCore(d_model, experts, expert_hidden, top_k, shared_expert, aux_loss_coef, z_loss_coef,
                                capacity_factor, init_std, init_std if out_std is None else out_std, seed, layer,
                                dtype == torch.float64, core_policy, index, bf16)
        self.d_model, self.experts, self.expert_hidden, self.top_k = d_model, experts, expert_hidden, top_k
        self.policy = policy
        self.compute_dtype = dtype  # activations (x, y, dx); parameters: the core's masters
        self._core_values = {}  # name → the tensor over the core's storage
        for name, value, _ in self._core.parameters():
            self._core_values[name] = value
            self.register_parameter(name, nn.Parameter(value))  # shares the core's storage
        self.last_load, self.last_dropped, self.last_aux_loss, self.last_z_loss = None, 0, 0.0, 0.0

    def _apply(self, fn, *args, **kwargs):
        """.to(), .cuda(), .cpu(), .double(), .bfloat16(), …: a new core layer where `fn` sends
        the parameters, with their values; bfloat16 becomes the compute dtype (masters stay float32)."""
        masters = next(iter(self._core_values.values()))
        probe = fn(torch.empty(0, dtype=masters.dtype, device=masters.device))
        device, dtype = probe.device, self.compute_dtype
        if probe.dtype != masters.dtype:
            dtype = probe.dtype
        if device == masters.device and dtype == self.compute_dtype:
            return self  # e.g. share_memory(), or a cast to what it is
        twin = MoKMoE(**dict(self._settings, dtype=dtype, device=device))
        for name in self._core_values:
            old, new = getattr(self, name), getattr(twin, name)
            with torch.no_grad():
                new.copy_(old)
            new.requires_grad_(old.requires_grad)
            if old.grad is not None:
                new.grad = old.grad.to(device=new.device, dtype=new.dtype)
        self._core, self._core_values, self.compute_dtype = twin._core, twin._core_values, dtype
        self._settings = twin._settings
        for name in self._core_values:
            setattr(self, name, getattr(twin, name))
        return self

    def _sync_parameters(self):
        """Copies into the core any parameter whose storage is no longer the core's."""
        for name, core_value in self._core_values.items():
            p = getattr(self, name)
            if p.data_ptr() != core_value.data_ptr():
                if p.shape != core_value.shape:
                    raise ValueError(f"MoKMoE: parameter {name} has shape {tuple(p.shape)}, "
                                     f"the core's is {tuple(core_value.shape)}")
                with torch.no_grad():
                    core_value.copy_(p)

    def forward(self, x):
        if x.shape[-1] != self.d_model:
            raise ValueError(f"MoKMoE: input has {x.shape[-1]} features, the layer {self.d_model}")
        if x.dtype != self.compute_dtype:
            raise TypeError(f"MoKMoE: input of {x.dtype}, the layer computes in {self.compute_dtype} "
                            f"(convert the input or the layer: .to({x.dtype}))")
        self._sync_parameters()
        x2 = x.reshape(-1, self.d_model)  # (n, d)
        params = [getattr(self, name) for name in self._core_values]
        stats = {}
        if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params)):
            y, loss = _MoeFunction.apply(self._core, stats, x2, *params)
        else:
            y, aux, z, load, dropped, _ = self._core.forward(x2, False)
            stats.update(aux_loss=aux, z_loss=z, load=load, dropped=dropped)
            loss = x.new_tensor(aux + z)
        self.last_load, self.last_dropped = stats["load"], stats["dropped"]
        self.last_aux_loss, self.last_z_loss = stats["aux_loss"], stats["z_loss"]
        return y.view(x.shape), loss

    def __deepcopy__(self, memo):
        """A new core layer with the same settings and a copy of the parameters (policy shared)."""
        twin = MoKMoE(**self._settings)
        twin.load_state_dict(self.state_dict())
        for name in self._core_values:
            getattr(twin, name).requires_grad_(getattr(self, name).requires_grad)
        twin.train(self.training)
        memo[id(self)] = twin
        return twin

    def extra_repr(self):
        return (f"d_model={self.d_model}, experts={self.experts}, expert_hidden={self.expert_hidden}, "
                f"top_k={self.top_k}")
