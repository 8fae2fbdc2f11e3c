"""MoKMoE (the core's MoE layer) against an MoE written here in plain torch, same weights.

The reference follows docs/model.md, "Mixture of experts", and core/backend/cpu_ops.cpp
(router_softmax_topk, router_loss_sums): softmax over all experts, top-k with ties to the
lower index, gates = p_chosen / Σ p_chosen, capacity in (token, slot) order, SwiGLU experts
with w_up = [gate | up], aux = coef·E·Σ f_e·P_e (f_e constant), z = coef·mean lse².

Run: PYTHONPATH=BUILD/interop/torch/python /usr/bin/python3 interop/torch/tests/test_moe.py
"""
import copy
import math
import unittest

import torch
import torch.nn.functional as F

import mok_torch
from finite_differences import relative_errors


def swiglu(x, w_up, w_down):
    f = w_down.shape[0]
    a = x @ w_up  # (m, 2f) = [gate | up]
    return (F.silu(a[:, :f]) * a[:, f:]) @ w_down


def reference_moe(x, w_router, w_up, w_down, top_k, aux_coef, z_coef, capacity_factor=0.0, shared=None):
    """(y, aux + z, load, dropped) for x (n, d); the choice of experts carries no gradient."""
    n = x.shape[0]
    experts = w_router.shape[1]
    logits = x @ w_router  # (n, E)
    p = torch.softmax(logits, dim=-1)
    choice = torch.sort(p.detach(), dim=-1, descending=True, stable=True).indices[:, :top_k]  # (n, k)
    chosen = p.gather(1, choice)
    gates = chosen / chosen.sum(dim=-1, keepdim=True)
    load = torch.bincount(choice.reshape(-1), minlength=experts)
    kept = torch.ones_like(choice, dtype=torch.bool)
    if capacity_factor > 0:  # first come, first served in (token, slot) order
        capacity = math.ceil(capacity_factor * n * top_k / experts)
        taken = [0] * experts
        for t in range(n):
            for s in range(top_k):
                e = choice[t, s].item()
                kept[t, s] = taken[e] < capacity
                taken[e] += int(kept[t, s])
    y = torch.zeros_like(x)
    for e in range(experts):
        t_idx, s_idx = ((choice == e) & kept).nonzero(as_tuple=True)
        out = swiglu(x[t_idx], w_up[e], w_down[e])
        y = y.index_add(0, t_idx, gates[t_idx, s_idx].unsqueeze(1) * out)
    if shared is not None:
        y = y + swiglu(x, *shared)
    f = load.to(x.dtype) / (n * top_k)
    aux = aux_coef * experts * (f * p.mean(dim=0)).sum()
    z = z_coef * (torch.logsumexp(logits, dim=-1) ** 2).mean()
    return y, aux + z, load.tolist(), int((~kept).sum())


def layer_params(moe):
    return [getattr(moe, name) for name in ("w_router", "w_up", "w_down")]


class MoKMoETest(unittest.TestCase):
    def compare(self, dtype, tol, capacity_factor=0.0, shared_expert=False, n=48, d=16, experts=6, hidden=12, k=2):
        torch.manual_seed(3)
        moe = mok_torch.MoKMoE(d, experts, hidden, top_k=k, shared_expert=shared_expert, aux_loss_coef=0.05,
                               z_loss_coef=0.01, capacity_factor=capacity_factor, init_std=0.3, dtype=dtype)
        x = torch.randn(n // 4, 4, d, dtype=dtype)
        r = torch.randn(n // 4, 4, d, dtype=dtype)
        loss_scale = 0.7
        # the core
        xk = x.clone().requires_grad_()
        y, router_loss = moe(xk)
        ((y * r).sum() + loss_scale * router_loss).backward()
        # the reference, with copies of the same weights
        xr = x.clone().requires_grad_()
        names = ["w_router", "w_up", "w_down"] + (["shared_w_up", "shared_w_down"] if shared_expert else [])
        ref_params = [getattr(moe, name).detach().clone().requires_grad_() for name in names]
        shared = ref_params[3:] if shared_expert else None
        y_ref, loss_ref, load, dropped = reference_moe(xr.view(-1, d), *ref_params[:3], k, 0.05, 0.01,
                                                       capacity_factor, shared)
        ((y_ref.view_as(r) * r).sum() + loss_scale * loss_ref).backward()

        self.assertEqual(moe.last_load, load)
        self.assertEqual(moe.last_dropped, dropped)
        torch.testing.assert_close(y, y_ref.view_as(y), rtol=tol, atol=tol)
        torch.testing.assert_close(router_loss, loss_ref, rtol=tol, atol=tol)
        torch.testing.assert_close(xk.grad, xr.grad, rtol=tol, atol=tol)
        for name, ref in zip(names, ref_params):
            torch.testing.assert_close(getattr(moe, name).grad, ref.grad, rtol=tol, atol=tol, msg=name)
        return moe

    def test_float64_matches_the_reference(self):
        self.compare(torch.float64, 1e-12)

    def test_float32_matches_the_reference(self):
        self.compare(torch.float32, 2e-5)

    def test_capacity_drops_as_the_reference(self):
        moe = self.compare(torch.float64, 1e-12, capacity_factor=0.5)
        self.assertGreater(moe.last_dropped, 0)

    def test_shared_expert_and_top1(self):
        self.compare(torch.float64, 1e-12, shared_expert=True)
        self.compare(torch.float64, 1e-12, k=1)

    def test_float64_matches_finite_differences(self):
        torch.manual_seed(5)
        moe = mok_torch.MoKMoE(5, 4, 3, top_k=2, aux_loss_coef=0.1, z_loss_coef=0.05, init_std=0.5,
                               dtype=torch.float64)
        x = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
        r = torch.randn(6, 5, dtype=torch.float64)

        def loss():
            y, router_loss = moe(x)
            return (y * r).sum() + 0.9 * router_loss

        errors = relative_errors(loss, [x] + layer_params(moe))
        for i, e in errors.items():
            self.assertLess(e, 1e-7, f"tensor {i}")

    def test_parameters_are_the_cores_storage(self):
        moe = mok_torch.MoKMoE(8, 4, 6, dtype=torch.float64)
        x = torch.randn(10, 8, dtype=torch.float64)
        y0, _ = moe(x)
        with torch.no_grad():
            moe.w_down.mul_(2.0)  # in place: the core computes with it, no copy
        y1, _ = moe(x)
        torch.testing.assert_close(y1, 2 * y0)
        moe.w_down.data = moe.w_down.data * 0.5  # new storage: copied into the core at the next call
        y2, _ = moe(x)
        torch.testing.assert_close(y2, y0)

    def test_deepcopy_is_a_new_core_layer(self):
        moe = mok_torch.MoKMoE(8, 4, 6, dtype=torch.float64)
        twin = copy.deepcopy(moe)
        x = torch.randn(10, 8, dtype=torch.float64)
        torch.testing.assert_close(twin(x)[0], moe(x)[0], rtol=0, atol=0)
        with torch.no_grad():
            twin.w_up.zero_()
        self.assertFalse(torch.equal(twin(x)[0], moe(x)[0]), "the copy has storage of its own")

    def test_backward_needs_its_own_forward(self):
        moe = mok_torch.MoKMoE(8, 4, 6)
        x = torch.randn(10, 8)
        y_first, _ = moe(x)
        with torch.no_grad():
            moe(x)  # keeps nothing: the first call's tensors stay
        y_first.sum().backward()
        y_a, _ = moe(x)
        y_b, _ = moe(x)  # replaces y_a's saved tensors
        with self.assertRaisesRegex(RuntimeError, "saved tensors are gone"):
            y_a.sum().backward()
        y_b.sum().backward()

    def test_kitten_policy_keeps_less_and_stays_close(self):
        torch.manual_seed(11)
        x = torch.randn(64, 16)
        r = torch.randn(64, 16)
        results = {}
        for method in ("exact", "lowbit"):
            # elementwise: the SwiGLU pre-activations low-bit too (custom mode keeps them exact)
            policy = mok_torch.KittenPolicy(method=method, bits=8, elementwise="lowbit")
            moe = mok_torch.MoKMoE(16, 4, 32, policy=policy, init_std=0.3)
            with mok_torch.SavedBytes(moe.parameters()) as saved:
                y, router_loss = moe(x)
            ((y * r).sum() + router_loss).backward()
            results[method] = (saved.core_bytes, moe.w_up.grad.clone())
        exact_bytes, exact_grad = results["exact"]
        lowbit_bytes, lowbit_grad = results["lowbit"]
        self.assertLess(lowbit_bytes, 0.5 * exact_bytes)
        rel = ((lowbit_grad - exact_grad).norm() / exact_grad.norm()).item()
        self.assertLess(rel, 0.02)
        self.assertGreater(rel, 0.0)


if __name__ == "__main__":
    unittest.main()
