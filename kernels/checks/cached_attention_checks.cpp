// Attention over KV caches (Ops::attention_cached) on the GPU against the CPU's, on fresh
// random rows: sequences at different positions (their caches partly filled already), one new
// row (decoding) and several (a prefill continuing a cache). fp32 against the CPU's float
// result; bf16 against the CPU on the bf16-rounded inputs. Both the output and the caches'
// new rows are compared; rows beyond the new ones must stay untouched.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/backend/exec_context.h"
#include "kernels/checks/check_util.h"
#include "kernels/cuda_ops.h"

namespace mok::cuda {

namespace {

mok::Tensor to_device(CudaOps& ops, const std::vector<float>& v, std::vector<int64_t> shape, mok::DType dtype) {
  mok::Tensor f = mok::Tensor::empty(shape, mok::DType::f32, ops.allocator());
  f.copy_from_host(v.data(), static_cast<int64_t>(v.size() * sizeof(float)));
  if (dtype == mok::DType::f32) return f;
  mok::Tensor t = mok::Tensor::empty(std::move(shape), dtype, ops.allocator());
  ops.convert(f, t);
  return t;
}

std::vector<float> to_host(CudaOps& ops, const mok::Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == mok::DType::f32) {
    t.copy_to_host(v.data(), t.bytes());
  } else {
    mok::Tensor f = mok::Tensor::empty(t.shape(), mok::DType::f32, ops.allocator());
    ops.convert(t, f);
    f.copy_to_host(v.data(), f.bytes());
  }
  return v;
}

void check_one(CheckInputs& in, std::vector<OpCheck>& out, mok::DType dtype, int batch, int n, int heads, int hd,
               int max_len) {
  const bool bf = dtype == mok::DType::bf16;
  const std::string name = std::string("attention_cached.") + (bf ? "bf16" : "fp32") + "_b" + std::to_string(batch) +
                           "_n" + std::to_string(n) + "_h" + std::to_string(heads) + "x" + std::to_string(hd);
  const int64_t d = int64_t(heads) * hd;
  std::vector<int> pos0(batch);
  const std::vector<int32_t> starts = in.uniform_int(static_cast<size_t>(batch), max_len - n + 1);
  for (int b = 0; b < batch; ++b) pos0[b] = starts[b];
  std::vector<float> qkv = in.normal(static_cast<size_t>(batch) * n * 3 * d);
  std::vector<std::vector<float>> kc(batch), vc(batch);
  for (int b = 0; b < batch; ++b) {
    kc[b] = in.normal(static_cast<size_t>(max_len) * d);
    vc[b] = in.normal(static_cast<size_t>(max_len) * d);
  }
  if (bf) {
    qkv = round_bf16(qkv);
    for (int b = 0; b < batch; ++b) {
      kc[b] = round_bf16(kc[b]);
      vc[b] = round_bf16(vc[b]);
    }
  }

  // The CPU (float core) on the same values.
  mok::Tensor q_cpu({static_cast<int64_t>(batch) * n, 3 * d});
  std::copy(qkv.begin(), qkv.end(), q_cpu.data());
  std::vector<mok::Tensor> k_cpu, v_cpu;
  std::vector<mok::Tensor*> kp_cpu, vp_cpu;
  for (int b = 0; b < batch; ++b) {
    k_cpu.emplace_back(std::vector<int64_t>{max_len, d});
    v_cpu.emplace_back(std::vector<int64_t>{max_len, d});
    std::copy(kc[b].begin(), kc[b].end(), k_cpu.back().data());
    std::copy(vc[b].begin(), vc[b].end(), v_cpu.back().data());
  }
  for (int b = 0; b < batch; ++b) {
    kp_cpu.push_back(&k_cpu[b]);
    vp_cpu.push_back(&v_cpu[b]);
  }
  mok::Tensor o_cpu({static_cast<int64_t>(batch) * n, d});
  mok::cpu_context().ops().attention_cached(q_cpu, n, kp_cpu, vp_cpu, pos0, heads, hd, o_cpu);

  CudaOps ops(0);
  const mok::Tensor q_dev = to_device(ops, qkv, {static_cast<int64_t>(batch) * n, 3 * d}, dtype);
  std::vector<mok::Tensor> k_dev, v_dev;
  std::vector<mok::Tensor*> kp_dev, vp_dev;
  for (int b = 0; b < batch; ++b) {
    k_dev.push_back(to_device(ops, kc[b], {max_len, d}, dtype));
    v_dev.push_back(to_device(ops, vc[b], {max_len, d}, dtype));
  }
  for (int b = 0; b < batch; ++b) {
    kp_dev.push_back(&k_dev[b]);
    vp_dev.push_back(&v_dev[b]);
  }
  mok::Tensor o_dev = to_device(ops, std::vector<float>(static_cast<size_t>(batch) * n * d, NAN),
                                {static_cast<int64_t>(batch) * n, d}, dtype);  // poisoned
  ops.attention_cached(q_dev, n, kp_dev, vp_dev, pos0, heads, hd, o_dev);
  ops.synchronize();

  const std::vector<double> o_ref(o_cpu.data(), o_cpu.data() + o_cpu.numel());
  out.push_back({name, relative_error(to_host(ops, o_dev), o_ref), bf ? kBf16Tolerance : kFp32Tolerance});
  std::vector<float> caches_dev;
  std::vector<double> caches_ref;
  for (int b = 0; b < batch; ++b) {
    for (const mok::Tensor* t : {&k_dev[b], &v_dev[b]}) {
      const std::vector<float> v = to_host(ops, *t);
      caches_dev.insert(caches_dev.end(), v.begin(), v.end());
    }
    caches_ref.insert(caches_ref.end(), k_cpu[b].data(), k_cpu[b].data() + k_cpu[b].numel());
    caches_ref.insert(caches_ref.end(), v_cpu[b].data(), v_cpu[b].data() + v_cpu[b].numel());
  }
  out.push_back({name + ".caches", relative_error(caches_dev, caches_ref), 0.0});  // copies: exact
}

}  // namespace

void check_cached_attention(CheckInputs& in, std::vector<OpCheck>& out) {
  run_guarded(out, "attention_cached", [&] {
    for (mok::DType t : {mok::DType::f32, mok::DType::bf16}) {
      check_one(in, out, t, 5, 1, 4, 64, 97);    // decoding: one new row per sequence
      check_one(in, out, t, 3, 7, 2, 32, 40);    // several new rows continuing a cache
      check_one(in, out, t, 2, 1, 12, 64, 1024); // the benchmark models' heads, a long cache
    }
  });
}

}  // namespace mok::cuda
