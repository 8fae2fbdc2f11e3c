// Attention over KV caches (Ops::attention_cached) on the GPU against the CPU's, on fresh
// random rows: sequences at different positions (their caches partly filled already), one new
// row (decoding) and several (a prefill continuing a cache). fp32 against the CPU's float
// result; bf16 against the CPU on the bf16-rounded inputs. Both the output and the caches'
// new rows are compared; rows beyond the new ones must stay untouched. Head widths cover
// every lane layout (one to 32 lanes a key, two packs a lane in fp32 beyond 128, widths no
// pack divides) and caches of several key chunks in both forms (a block per chunk, and a block
// looping over a row's chunks); a last check asks the two forms for bitwise the same rows.
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

// The same sequences decoded alone (few rows: a block per key chunk, merged by a second pass)
// and among enough others that each row's chunks are looped over by one block: every output
// element of the shared sequences must have the same bits (a row's result is its own keys',
// whatever batch it is in).
void check_forms_agree(CheckInputs& in, std::vector<OpCheck>& out, mok::DType dtype) {
  const bool bf = dtype == mok::DType::bf16;
  const int heads = 8, hd = 16, max_len = 600, many = 512, few = 4;  // 512·8 rows: the loop form
  const int64_t d = int64_t(heads) * hd;
  std::vector<int> pos0(many);
  const std::vector<int32_t> starts = in.uniform_int(static_cast<size_t>(many), max_len);
  for (int b = 0; b < many; ++b) pos0[b] = starts[b];
  pos0[0] = max_len - 1;  // every chunk of the cache
  std::vector<float> qkv = in.normal(static_cast<size_t>(many) * 3 * d);
  if (bf) qkv = round_bf16(qkv);
  CudaOps ops(0);
  std::vector<mok::Tensor> k, v;
  std::vector<mok::Tensor*> kp, vp;
  for (int b = 0; b < many; ++b) {
    std::vector<float> kc = in.normal(static_cast<size_t>(max_len) * d), vc = in.normal(static_cast<size_t>(max_len) * d);
    k.push_back(to_device(ops, bf ? round_bf16(kc) : kc, {max_len, d}, dtype));
    v.push_back(to_device(ops, bf ? round_bf16(vc) : vc, {max_len, d}, dtype));
  }
  for (int b = 0; b < many; ++b) {
    kp.push_back(&k[b]);
    vp.push_back(&v[b]);
  }
  const auto decode = [&](int batch) {
    const std::vector<float> rows(qkv.begin(), qkv.begin() + int64_t(batch) * 3 * d);
    const mok::Tensor q = to_device(ops, rows, {batch, 3 * d}, dtype);
    mok::Tensor o = to_device(ops, std::vector<float>(static_cast<size_t>(batch) * d, NAN), {batch, d}, dtype);
    const std::vector<mok::Tensor*> ks(kp.begin(), kp.begin() + batch), vs(vp.begin(), vp.begin() + batch);
    ops.attention_cached(q, 1, ks, vs, std::vector<int>(pos0.begin(), pos0.begin() + batch), heads, hd, o);
    std::vector<float> result = to_host(ops, o);
    result.resize(static_cast<size_t>(few) * d);
    return result;
  };
  const std::vector<float> alone = decode(few), among = decode(many);
  out.push_back({std::string("attention_cached.") + (bf ? "bf16" : "fp32") + ".split_and_loop_forms_bitwise",
                 differing_elements(alone, among), 0.0});
}

}  // namespace

void check_cached_attention(CheckInputs& in, std::vector<OpCheck>& out) {
  run_guarded(out, "attention_cached", [&] {
    for (mok::DType t : {mok::DType::f32, mok::DType::bf16}) {
      check_one(in, out, t, 5, 1, 4, 64, 97);    // decoding: one new row per sequence
      check_one(in, out, t, 3, 7, 2, 32, 40);    // several new rows continuing a cache
      check_one(in, out, t, 2, 1, 12, 64, 1024); // the benchmark models' heads, a long cache
      check_one(in, out, t, 3, 1, 4, 128, 700);  // wide heads, several chunks
      check_one(in, out, t, 2, 2, 2, 256, 600);  // the widest head (fp32: two packs a lane)
      check_one(in, out, t, 4, 1, 3, 48, 300);   // a width padded to the lanes
      check_one(in, out, t, 2, 3, 2, 33, 530);   // a width no pack divides: one element at a time
      check_one(in, out, t, 2, 200, 12, 8, 900); // 4 800 rows: each block loops over its chunks
      check_forms_agree(in, out, t);
    }
  });
}

}  // namespace mok::cuda
