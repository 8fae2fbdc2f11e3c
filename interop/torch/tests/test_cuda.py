"""KittenLinear and MoKMoE on CUDA tensors, where the core computes with its CUDA kernels.

Against torch's own F.linear and the plain-torch MoE of test_moe.py (same weights), with a
float64 evaluation of the same inputs as the yardstick; each comparison prints its figure.

- KittenLinear: y is torch's own F.linear, bitwise; dx is torch's dy·W (to 1e-6 in float32,
  2^-7 in bfloat16, in case autograd's linear backward folds the batch another way). dW from the core: float32 exact within float rounding of the product
  (1e-5·Σ|dy||x| per element; TF32 off on both sides); 8-bit within the keeper's bound
  Σ_t |dy[t, o]|·s_t/2 plus that rounding; bfloat16 (dW cast to the weight's dtype) within
  2^-7·Σ|dy||x| plus the keeper's bound.
- MoKMoE against the reference MoE with the weights it computes with: float32 y, the router
  loss and every gradient within 1e-4 of the float64 evaluation (max error / max magnitude);
  bfloat16 (float32 masters, bf16 compute copies) within 2e-2 in norm (‖a − b‖/‖b‖), or no
  worse than 4× torch's own bfloat16 run of the reference; the routing (load) equal.
- Repeat runs bitwise equal; a non-default torch stream gives the default stream's bits.

Exits 77 (skipped) without a GPU or when mok_torch was built without CUDA.

Run: PYTHONPATH=BUILD/interop/torch/python python3 interop/torch/tests/test_cuda.py
"""
import sys
import unittest

import torch
import torch.nn.functional as F

import mok_torch

if not torch.cuda.is_available() or not mok_torch.cuda_built():
    why = "no CUDA device" if not torch.cuda.is_available() else "mok_torch was built without CUDA"
    print(f"skipped: {why}")
    sys.exit(77)

from test_moe import reference_moe  # noqa: E402  (after the skip: it needs nothing of CUDA)

DEV = torch.device("cuda", torch.cuda.current_device())
torch.backends.cuda.matmul.allow_tf32 = False  # float32 products in float32, as the core's
torch.backends.cudnn.allow_tf32 = False


def max_rel(a, b):
    """max|a − b| / max|b| (0 when both are zero)."""
    a, b = a.double(), b.double()
    scale = b.abs().max().item()
    return (a - b).abs().max().item() / scale if scale > 0 else (a - b).abs().max().item()


def norm_rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item() if b.norm() > 0 else (a - b).norm().item()


def side_stream():
    """A new stream that starts after what the current one has queued (the inputs)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    return s


def linear_grads(module, x, r, dtype):
    """(y, dx, dW) of `module` for the loss Σ r∘y."""
    module.zero_grad()
    xk = x.clone().requires_grad_()
    y = module(xk)
    (y * r).sum().backward()
    return y, xk.grad, module.weight.grad


def reference_linear(w, b, x, r):
    xr = x.clone().requires_grad_()
    wr = w.detach().clone().requires_grad_()
    br = b.detach().clone().requires_grad_()
    y = F.linear(xr, wr, br)
    (y * r).sum().backward()
    return y, xr.grad, wr.grad


def lowbit_bound(x, dy, bits):
    """(out, in) elementwise bound on |dW − dW_exact| of a nearest-rounded copy: Σ_t |dy[t,o]|·s_t/2."""
    x2, dy2 = x.reshape(-1, x.shape[-1]).double(), dy.reshape(-1, dy.shape[-1]).double()
    qmax = 127 if bits == 8 else 7
    half_step = x2.abs().amax(dim=1) / qmax / 2
    return dy2.abs().t().mm(half_step[:, None].expand_as(x2))


def rounding_scale(x, dy):
    """Σ_t |dy[t,o]|·|x[t,i]|: what a float sum of the products is rounded relative to."""
    x2, dy2 = x.reshape(-1, x.shape[-1]).double(), dy.reshape(-1, dy.shape[-1]).double()
    return dy2.abs().t().mm(x2.abs())


class KittenLinearCudaTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(7)
        self.x = torch.randn(8, 128, 256, device=DEV)  # (batch, seq, in)
        self.r = torch.randn(8, 128, 192, device=DEV)  # dL/dy

    def check(self, dtype, method, bits=8):
        m = mok_torch.KittenLinear(256, 192, method=method, bits=bits).to(DEV, dtype)
        x, r = self.x.to(dtype), self.r.to(dtype)
        y_ref, dx_ref, dw_ref = reference_linear(m.weight, m.bias, x, r)
        y, dx, dw = linear_grads(m, x, r, dtype)
        self.assertTrue(torch.equal(y, y_ref), "forward is torch's F.linear")
        # dx is torch's dy·W; autograd's linear backward may fold the batch another way
        dx_bitwise, dx_err = torch.equal(dx, dx_ref), max_rel(dx, dx_ref)
        self.assertLessEqual(dx_err, 1e-6 if dtype == torch.float32 else 2.0 ** -7, "dx is torch's dy·W")
        self.assertEqual(dw.dtype, dtype)
        exact = rounding_scale(x, r)  # (out, in)
        dw64 = r.reshape(-1, 192).double().t().mm(x.reshape(-1, 256).double())  # dW of these x, dy
        slack = (1e-5 if dtype == torch.float32 else 2.0 ** -7) * exact
        bound = slack + (lowbit_bound(x, r, bits) if method == "lowbit" else 0)
        err = (dw.double() - dw64).abs()
        torch_err = (dw_ref.double() - dw64).abs()
        worst = (err / bound).max().item()
        print(f"  KittenLinear {str(dtype)[6:]:8s} {method:6s}: dW max err {err.max().item():.3e} "
              f"(torch's own dW {torch_err.max().item():.3e}), worst err/bound {worst:.3f}; y bitwise F.linear's, "
              f"dx {'bitwise' if dx_bitwise else f'within {dx_err:.1e}'}")
        self.assertTrue(worst <= 1.0, f"dW error over its bound ({worst:.3f} of it)")
        return err, bound

    def test_float32_exact_is_torchs_dw_to_float_rounding(self):
        self.check(torch.float32, "exact")

    def test_float32_8bit_within_the_bound(self):
        err, bound = self.check(torch.float32, "lowbit", 8)
        self.assertGreater(err.max().item(), 0.0, "a low-bit copy changes dW a little")

    def test_float32_4bit_within_the_bound(self):
        self.check(torch.float32, "lowbit", 4)

    def test_bfloat16_exact_and_8bit(self):
        self.check(torch.bfloat16, "exact")
        self.check(torch.bfloat16, "lowbit", 8)

    def test_keeps_the_compact_copy_on_the_device(self):
        m = mok_torch.KittenLinear(256, 192, bits=8).to(DEV)
        y = m(self.x.requires_grad_())
        n = 8 * 128
        self.assertEqual(m.last_saved_bytes, n * 256 + 4 * n)  # codes + one float scale per row
        self.assertGreater(mok_torch.core_memory()["cuda.live"], 0)
        self.assertTrue(0.0 < m.last_relative_error < 0.02)
        (y * self.r).sum().backward()

    def test_low_rank_methods_match_the_cpu(self):
        # The same module on the CPU and on the GPU: the same Gaussian draws; the GPU
        # orthonormalises by CholeskyQR2 where the CPU uses Householder QR (the same projector).
        for method in ("sketch", "rsvd", "subspace"):
            torch.manual_seed(3)
            cpu = mok_torch.KittenLinear(256, 192, method=method, rank=8)
            gpu = mok_torch.KittenLinear(256, 192, method=method, rank=8)
            gpu.load_state_dict(cpu.state_dict())
            gpu = gpu.to(DEV)
            _, dx_c, dw_c = linear_grads(cpu, self.x.cpu(), self.r.cpu(), torch.float32)
            _, dx_g, dw_g = linear_grads(gpu, self.x, self.r, torch.float32)
            e = norm_rel(dw_g.cpu(), dw_c)
            print(f"KittenLinear {method} rank 8 float32: GPU dW against the CPU's {e:.2e} (tolerance 1e-4)")
            self.assertLess(e, 1e-4)
            self.assertLess(norm_rel(dx_g.cpu(), dx_c), 1e-5)

    def test_repeat_runs_and_streams_are_bitwise_equal(self):
        for dtype in (torch.float32, torch.bfloat16):
            runs = []
            for side in (False, True, False):
                torch.manual_seed(1)
                m = mok_torch.KittenLinear(256, 192, bits=8, rounding="stochastic").to(DEV, dtype)
                with torch.cuda.stream(side_stream() if side else torch.cuda.current_stream()):
                    y, dx, dw = linear_grads(m, self.x.to(dtype), self.r.to(dtype), dtype)
                torch.cuda.synchronize()
                runs.append((y, dx, dw))
            for other in runs[1:]:
                for a, b in zip(runs[0], other):
                    self.assertTrue(torch.equal(a, b), f"{dtype}: a repeat run differs")
        print("  KittenLinear: three runs (one on a side stream) bitwise equal, float32 and bfloat16")


class MoKMoECudaTest(unittest.TestCase):
    D, E, F, K, N = 64, 8, 96, 2, 512

    def run_layer(self, moe, x, r, loss_scale=0.7):
        xk = x.clone().requires_grad_()
        for p in moe.parameters():
            p.grad = None
        y, loss = moe(xk)
        ((y * r).sum() + loss_scale * loss).backward()
        return [y, loss, xk.grad] + [p.grad for p in (moe.w_router, moe.w_up, moe.w_down)], moe.last_load

    def reference(self, moe, x, r, dtype, weight_dtype, loss_scale=0.7):
        """The plain-torch MoE in `dtype` with the layer's weights rounded to weight_dtype."""
        xr = x.to(dtype).requires_grad_()
        ws = [getattr(moe, n).detach().to(weight_dtype).to(dtype).requires_grad_() for n in ("w_router", "w_up", "w_down")]
        y, loss, load, _ = reference_moe(xr.view(-1, self.D), *ws, self.K, 0.05, 0.01)
        ((y.view_as(xr) * r.to(dtype)).sum() + loss_scale * loss).backward()
        return [y.view_as(xr), loss, xr.grad] + [w.grad for w in ws], load

    def layer(self, dtype, **kwargs):
        return mok_torch.MoKMoE(self.D, self.E, self.F, top_k=self.K, aux_loss_coef=0.05, z_loss_coef=0.01,
                                init_std=0.2, dtype=dtype, device=DEV, **kwargs)

    def inputs(self, dtype):
        torch.manual_seed(3)
        x = torch.randn(self.N // 8, 8, self.D, device=DEV)
        r = torch.randn(self.N // 8, 8, self.D, device=DEV)
        return x.to(dtype), r.to(dtype)

    NAMES = ("y", "router_loss", "dx", "dw_router", "dw_up", "dw_down")

    def test_float32_matches_the_reference(self):
        moe = self.layer(torch.float32)
        x, r = self.inputs(torch.float32)
        got, load = self.run_layer(moe, x, r)
        ref, ref_load = self.reference(moe, x, r, torch.float64, torch.float32)
        self.assertEqual(load, ref_load, "the same routing")
        for name, a, b in zip(self.NAMES, got, ref):
            e = max_rel(a, b)
            print(f"  MoKMoE float32 {name:12s} max err / max |ref| {e:.2e} (tolerance 1e-4)")
            self.assertLessEqual(e, 1e-4, name)

    def test_bfloat16_matches_the_reference(self):
        moe = self.layer(torch.bfloat16)
        self.assertEqual(moe.w_up.dtype, torch.float32, "float32 masters")
        x, r = self.inputs(torch.bfloat16)
        got, load = self.run_layer(moe, x, r)
        self.assertEqual(got[0].dtype, torch.bfloat16)
        ref, ref_load = self.reference(moe, x, r, torch.float64, torch.bfloat16)  # the bf16 copies it computes with
        torch_bf16, _ = self.reference(moe, x, r, torch.bfloat16, torch.bfloat16)
        self.assertEqual(load, ref_load, "the same routing")
        for name, a, b, t in zip(self.NAMES, got, ref, torch_bf16):
            e, te = norm_rel(a, b), norm_rel(t, b)
            ok = e <= 2e-2 or e <= 4 * te
            print(f"  MoKMoE bfloat16 {name:12s} ‖err‖/‖ref‖ {e:.2e} (torch's bf16 reference {te:.2e}; "
                  f"tolerance 2e-2 or 4x torch's) {'ok' if ok else 'FAIL'}")
            self.assertTrue(ok, name)

    def test_repeat_runs_and_streams_are_bitwise_equal(self):
        for dtype in (torch.float32, torch.bfloat16):
            x, r = self.inputs(dtype)
            runs = []
            for side in (False, True, False):
                moe = self.layer(dtype)
                with torch.cuda.stream(side_stream() if side else torch.cuda.current_stream()):
                    got, _ = self.run_layer(moe, x, r)
                torch.cuda.synchronize()
                runs.append(got)
            for other in runs[1:]:
                for name, a, b in zip(self.NAMES, runs[0], other):
                    self.assertTrue(torch.equal(a, b), f"{dtype} {name}: a repeat run differs")
        print("  MoKMoE: three runs (one on a side stream) bitwise equal, float32 and bfloat16")

    def test_optimizer_steps_reach_the_bf16_copies(self):
        moe = self.layer(torch.bfloat16)
        x, r = self.inputs(torch.bfloat16)
        y0, _ = moe(x)
        with torch.no_grad():
            moe.w_down.mul_(2.0)  # in place, as an optimizer writes: the next forward sees it
        y1, _ = moe(x)
        e = norm_rel(y1, 2 * y0)
        print(f"  MoKMoE bfloat16: after an in-place update ‖y − 2·y0‖/‖2·y0‖ {e:.2e}")
        self.assertLess(e, 1e-2)

    def test_moving_from_the_cpu_keeps_the_values(self):
        cpu = mok_torch.MoKMoE(self.D, self.E, self.F, top_k=self.K, init_std=0.2)
        torch.manual_seed(5)
        x = torch.randn(64, self.D)
        y_cpu, _ = cpu(x)
        gpu = cpu.cuda()
        self.assertEqual(gpu.w_up.device.type, "cuda")
        y_gpu, _ = gpu(x.to(DEV))
        e = max_rel(y_gpu.cpu(), y_cpu)
        print(f"  MoKMoE moved to the GPU: y against the CPU's {e:.2e} (tolerance 1e-4)")
        self.assertLessEqual(e, 1e-4)
        gpu.to(torch.bfloat16)
        self.assertEqual((gpu.compute_dtype, gpu.w_up.dtype), (torch.bfloat16, torch.float32))
        y_bf16, _ = gpu(x.to(DEV, torch.bfloat16))
        self.assertLess(norm_rel(y_bf16, y_gpu), 3e-2)

    def test_kitten_policy_keeps_less_and_stays_close(self):
        results = {}
        for method in ("exact", "lowbit"):
            policy = mok_torch.KittenPolicy(method=method, bits=8, elementwise="lowbit")
            moe = self.layer(torch.float32, policy=policy)
            x, r = self.inputs(torch.float32)
            with mok_torch.SavedBytes(moe.parameters()) as saved:
                y, loss = moe(x.requires_grad_())
            ((y * r).sum() + loss).backward()
            results[method] = (saved.core_bytes, moe.w_up.grad.clone())
        rel = norm_rel(results["lowbit"][1], results["exact"][1])
        print(f"  MoKMoE 8-bit policy: core saved bytes {results['exact'][0]:,} → {results['lowbit'][0]:,}, "
              f"w_up gradient ‖err‖/‖exact‖ {rel:.2e}")
        self.assertLess(results["lowbit"][0], 0.5 * results["exact"][0])
        self.assertLess(rel, 0.02)


if __name__ == "__main__":
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) on {torch.cuda.get_device_name(DEV)}")
    unittest.main(verbosity=2)
