"""KittenLinear against torch's own linear layer: what it keeps, and the gradients it gives.

Run: PYTHONPATH=BUILD/interop/torch/python /usr/bin/python3 interop/torch/tests/test_kitten_linear.py
"""
import copy
import math
import unittest

import torch
import torch.nn.functional as F

import mok_torch
from finite_differences import relative_errors


def reference_and_kitten(module, x, r):
    """(y, dx, dW, db) of F.linear and of `module` for the loss Σ r∘y, same weights."""
    xr = x.clone().requires_grad_()
    w = module.weight.detach().clone().requires_grad_()
    b = module.bias.detach().clone().requires_grad_()
    y_ref = F.linear(xr, w, b)
    (y_ref * r).sum().backward()
    xk = x.clone().requires_grad_()
    module.zero_grad()
    y = module(xk)
    (y * r).sum().backward()
    return (y_ref, xr.grad, w.grad, b.grad), (y, xk.grad, module.weight.grad, module.bias.grad)


def lowbit_dw_bound(x, dy, bits, stochastic):
    """Elementwise bound on |dW − dW_exact| (out, in): Σ_t |dy[t, o]|·e_t, e_t the row's code error bound."""
    x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
    qmax = 127 if bits == 8 else 7
    scale = x2.abs().amax(dim=1) / qmax  # (n) one scale per row
    e = scale if stochastic else scale / 2
    bound = dy2.abs().t().mm(e[:, None].expand_as(x2))
    slack = 1e-5 * dy2.abs().t().mm(x2.abs())  # float32 rounding of the two products
    return bound + slack


class KittenLinearTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(7)
        self.x = torch.randn(4, 16, 48)  # (batch, seq, in)
        self.r = torch.randn(4, 16, 40)  # dL/dy

    def check_lowbit(self, bits, rounding):
        m = mok_torch.KittenLinear(48, 40, bits=bits, rounding=rounding)
        (y_ref, dx_ref, dw_ref, db_ref), (y, dx, dw, db) = reference_and_kitten(m, self.x, self.r)
        self.assertTrue(torch.equal(y, y_ref), "forward is torch's linear")
        torch.testing.assert_close(dx, dx_ref, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(db, db_ref, rtol=1e-6, atol=1e-6)
        err = (dw - dw_ref).abs()
        bound = lowbit_dw_bound(self.x, self.r, bits, rounding == "stochastic")
        self.assertTrue(bool((err <= bound).all()), f"dW error {err.max():.3g} over the bound")
        self.assertGreater(err.max().item(), 0.0, "a low-bit copy changes dW a little")
        return err, bound

    def test_8bit_gives_exact_dx_and_dw_within_the_bound(self):
        err, bound = self.check_lowbit(8, "nearest")
        # The bound is not loose by orders of magnitude: errors reach a fair share of it.
        self.assertGreater((err / bound).max().item(), 0.05)

    def test_4bit_and_stochastic_rounding_stay_within_their_bounds(self):
        self.check_lowbit(4, "nearest")
        self.check_lowbit(8, "stochastic")

    def test_dx_is_what_torch_computes(self):
        m = mok_torch.KittenLinear(48, 40, bits=4)
        (_, dx_ref, _, _), (_, dx, _, _) = reference_and_kitten(m, self.x, self.r)
        self.assertTrue(torch.equal(dx, dx_ref), "dx = dy·W, the same product torch's linear backward runs")

    def test_exact_method_gives_torchs_gradients(self):
        m = mok_torch.KittenLinear(48, 40, method="exact")
        (_, dx_ref, dw_ref, db_ref), (_, dx, dw, db) = reference_and_kitten(m, self.x, self.r)
        self.assertTrue(torch.equal(dx, dx_ref))
        torch.testing.assert_close(dw, dw_ref, rtol=1e-6, atol=1e-6)  # the core's GEMM: another summation order
        torch.testing.assert_close(db, db_ref, rtol=0, atol=0)

    def test_saves_only_the_compact_copy(self):
        for bits in (8, 4):
            m = mok_torch.KittenLinear(48, 40, bits=bits)
            x = self.x.clone().requires_grad_()
            with mok_torch.SavedBytes(m.parameters()) as saved:
                y = m(x)
            n, d = 64, 48
            held = n * math.ceil(d * bits / 8) + 4 * n  # codes + one float32 scale per row
            self.assertEqual(m.last_saved_bytes, held)
            self.assertEqual(saved.core_bytes, held)
            self.assertEqual(saved.torch_bytes, 0, "autograd keeps no tensor of x")
            y.sum().backward()
            self.assertEqual(mok_torch.core_saved_bytes(), 0, "backward frees the copy")
        ref = torch.nn.Linear(48, 40)
        with mok_torch.SavedBytes(ref.parameters()) as saved:
            ref(self.x.clone().requires_grad_())
        self.assertEqual(saved.torch_bytes, 64 * 48 * 4, "torch's linear keeps x in float32")

    def test_float64_exact_matches_finite_differences(self):
        m = mok_torch.KittenLinear(7, 5, method="exact", dtype=torch.float64)
        x = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
        r = torch.randn(3, 5, dtype=torch.float64)
        errors = relative_errors(lambda: (m(x) * r).sum(), [x, m.weight, m.bias])
        for i, e in errors.items():
            self.assertLess(e, 1e-8, f"tensor {i}")

    def test_float64_lowbit_dx_matches_finite_differences(self):
        m = mok_torch.KittenLinear(7, 5, bits=8, dtype=torch.float64)
        x = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
        r = torch.randn(3, 5, dtype=torch.float64)
        errors = relative_errors(lambda: (m(x) * r).sum(), [x, m.weight])
        self.assertLess(errors[0], 1e-8, "dx is exact")
        self.assertLess(errors[1], 1e-2, "dW from 8-bit codes")
        self.assertGreater(errors[1], 1e-8)

    def test_low_rank_methods_through_the_core_policy(self):
        # rsvd at full rank reproduces x: dW as torch's (the range finder's rounding aside).
        m = mok_torch.KittenLinear(48, 40, method="rsvd", rank=48)
        (_, _, dw_ref, _), (_, _, dw, _) = reference_and_kitten(m, self.x, self.r)
        torch.testing.assert_close(dw, dw_ref, rtol=1e-3, atol=1e-3)
        for method in ("sketch", "rsvd", "subspace"):
            m = mok_torch.KittenLinear(48, 40, method=method, rank=8)
            (_, dx_ref, dw_ref, _), (_, dx, dw, _) = reference_and_kitten(m, self.x, self.r)
            self.assertTrue(torch.equal(dx, dx_ref), method)
            self.assertTrue(torch.isfinite(dw).all(), method)
            self.assertEqual(m.policy.choice(), f"{method} r=8")
            rel = ((dw - dw_ref).norm() / dw_ref.norm()).item()
            self.assertGreater(rel, 1e-4, f"{method} at rank 8 of 48 is an approximation")
        # held bytes: n·r floats for sketch (P; Q is regenerated)
        m = mok_torch.KittenLinear(48, 40, method="sketch", rank=8)
        m(self.x.clone().requires_grad_())
        self.assertEqual(m.last_saved_bytes, 64 * 8 * 4)

    def test_policy_settings_are_the_configs(self):
        p = mok_torch.KittenPolicy(method="rsvd", rank=16, schedule="linear", final_rank=4, total_steps=10)
        self.assertEqual(p.choice(), "rsvd r=16")
        p.set_step(10)
        self.assertEqual(p.choice(), "rsvd r=4")
        p = mok_torch.KittenPolicy(method="lowbit", bits=4, kinds={"head": {"method": "exact"}}, warmup_steps=2)
        self.assertEqual(p.choice(0, "head.input"), "exact")
        self.assertEqual(p.choice(0, "attn.qkv.input"), "exact", "exact warm-up")
        p.set_step(2)
        self.assertEqual(p.choice(0, "attn.qkv.input"), "lowbit 4")
        self.assertEqual(p.choice(0, "head.input"), "exact")
        with self.assertRaisesRegex(ValueError, "kittens.bits"):
            mok_torch.KittenPolicy(bits=5)
        with self.assertRaisesRegex(ValueError, "no_such_key"):
            mok_torch.KittenPolicy(no_such_key=1)

    def test_shared_policy_reports_per_layer_errors(self):
        p = mok_torch.KittenPolicy(method="lowbit", bits=8, layers=2)
        a = mok_torch.KittenLinear(48, 40, policy=p, layer=0)
        b = mok_torch.KittenLinear(40, 8, policy=p, layer=1)
        b(a(self.x)).sum().backward()
        metrics = p.metrics()
        self.assertIn("kittens/error/layer0", metrics)
        self.assertIn("kittens/error/layer1", metrics)
        self.assertLess(metrics["kittens/error/layer0"], 0.02)  # 8-bit codes of Gaussian rows

    def test_backward_twice_is_refused(self):
        m = mok_torch.KittenLinear(48, 40)
        y = m(self.x)
        y.sum().backward(retain_graph=True)
        with self.assertRaisesRegex(RuntimeError, "backward twice"):
            y.sum().backward()

    def test_no_grad_keeps_nothing(self):
        m = mok_torch.KittenLinear(48, 40)
        with torch.no_grad():
            m(self.x)
        self.assertEqual(mok_torch.core_saved_bytes(), 0)

    def test_swap_linears_keeps_the_model_function(self):
        model = torch.nn.Sequential(torch.nn.Linear(48, 32), torch.nn.GELU(), torch.nn.Linear(32, 40))
        y_ref = model(self.x)
        names = mok_torch.swap_linears(model, mok_torch.KittenPolicy(bits=8, layers=2))
        self.assertEqual(names, ["0", "2"])
        self.assertIsInstance(model[0], mok_torch.KittenLinear)
        self.assertTrue(torch.equal(model(self.x), y_ref))
        twin = copy.deepcopy(model)
        self.assertIs(twin[0].policy, model[0].policy, "a policy is shared, like a config")
        self.assertTrue(torch.equal(twin(self.x), y_ref))


if __name__ == "__main__":
    unittest.main()
