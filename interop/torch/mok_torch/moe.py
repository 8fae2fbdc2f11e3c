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

The core layer keeps one call's saved tensors: backward must follow its forward before the
next forward with gradients (the usual training step). Otherwise backward raises.
"""
import torch
from torch import nn

from . import _C


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
    and expert inputs, SwiGLU pre-activations), `layer` its layer index. dtype: float32 or
    float64 (the core's two builds).

    After each forward: last_load (pairs per expert), last_dropped, last_aux_loss, last_z_loss.
    """

    def __init__(self, d_model, experts, expert_hidden, top_k=2, shared_expert=False, aux_loss_coef=0.01,
                 z_loss_coef=0.001, capacity_factor=0.0, init_std=0.02, out_std=None, seed=1234, policy=None,
                 layer=0, dtype=torch.float32):
        super().__init__()
        self._settings = dict(d_model=d_model, experts=experts, expert_hidden=expert_hidden, top_k=top_k,
                              shared_expert=shared_expert, aux_loss_coef=aux_loss_coef, z_loss_coef=z_loss_coef,
                              capacity_factor=capacity_factor, init_std=init_std, out_std=out_std, seed=seed,
                              policy=policy, layer=layer, dtype=dtype)
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"MoKMoE: the core computes in float32 or float64, not {dtype}")
        core_policy = policy._core(dtype) if policy is not None else None
        self._core = _C.MoeCore(d_model, experts, expert_hidden, top_k, shared_expert, aux_loss_coef, z_loss_coef,
                                capacity_factor, init_std, init_std if out_std is None else out_std, seed, layer,
                                dtype == torch.float64, core_policy)
        self.d_model, self.experts, self.expert_hidden, self.top_k = d_model, experts, expert_hidden, top_k
        self.policy = policy
        self._core_values = {}  # name → the tensor over the core's storage
        for name, value, _ in self._core.parameters():
            self._core_values[name] = value
            self.register_parameter(name, nn.Parameter(value))  # shares the core's storage
        self.last_load, self.last_dropped, self.last_aux_loss, self.last_z_loss = None, 0, 0.0, 0.0

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
