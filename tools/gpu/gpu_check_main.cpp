// mok-gpu-check: on a GPU machine, every CUDA kernel against the CPU reference on fresh
// random inputs, whole training steps against the CPU core (kernels/checks/), then kernel and
// model timings. Built with the project where nvcc is found; tools/gpu/pack.sh packs it with
// the libraries a bare GPU machine lacks.
//   mok-gpu-check [--checks GROUP,...] [--timings GROUP,...] [--no-timings]
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/util/counter_rng.h"
#include "kernels/checks/check_util.h"
#include "kernels/checks/cuda_op_checks.h"
#include "kernels/checks/median_time.h"
#include "kernels/device_buffer.h"
#include "kernels/device_info.h"
#include "kernels/sketch_projection.h"

namespace {


std::vector<float> normals(size_t n, uint64_t stream) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(mok::counter_normal(2026, stream, i));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a pipe as they are printed
  std::vector<std::string> groups, timing_groups;
  bool timings = true;
  auto split = [](const std::string& list, std::vector<std::string>& into) {
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      if (comma > at) into.push_back(list.substr(at, comma - at));
      at = comma + 1;
    }
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-timings") {
      timings = false;
    } else if (a == "--checks" && i + 1 < argc) {
      split(argv[++i], groups);
    } else if (a == "--timings" && i + 1 < argc) {
      split(argv[++i], timing_groups);
    } else {
      std::fprintf(stderr,
                   "usage: mok-gpu-check [--checks GROUP,...] [--timings GROUP,...] [--no-timings]\n"
                   "  check groups: elementwise, gemm, moe, attention, sketch, kittens (lowbit: its row\n"
                   "  codes alone), model, graph (steps replayed from a CUDA graph), parallel (default: all)\n"
                   "  timing groups: elementwise, gemm, routing, attention, model, kittens, sketch, profile\n"
                   "  (default: all; gemm ends with routing's figures), and gemm_candidates (only when named:\n"
                   "  the dense step's products through each of cuBLASLt's first candidates)\n");
      return 2;
    }
  }
  const auto q = mok::cuda::query_devices();
  if (q.devices.empty()) {
    std::fprintf(stderr, "no CUDA device: %s\n", q.unavailable_reason.c_str());
    return 1;
  }
  const auto& dev = q.devices[0];
  const size_t lt = cublasLtGetVersion();  // major·10000 + minor·100 + patch: the library loaded
  std::printf("device: %s, sm_%d%d, %d SMs, %.1f GiB; cuBLASLt %zu.%zu.%zu\n", dev.name.c_str(), dev.sm_major,
              dev.sm_minor, dev.multiprocessors, dev.memory_bytes / 1073741824.0, lt / 10000, lt / 100 % 100,
              lt % 100);

  int failed = 0;
  const auto seed = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::printf("\n%-28s %12s %8s\n", "check", "rel.err", "result");
  std::vector<mok::cuda::OpCheck> checks;
  try {
    checks = mok::cuda::run_cuda_op_checks(seed, groups);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mok-gpu-check: %s\n", e.what());
    return 2;
  }
  for (const auto& c : checks) {
    std::printf("%-28s %12.3e %8s\n", c.name.c_str(), c.relative_error, c.passed() ? "ok" : "FAIL");
    failed += !c.passed();
  }

  if (!timings) {
    std::printf("\n%s\n", failed ? "SOME CHECKS FAILED" : "all checks passed");
    return failed ? 1 : 0;
  }
  auto timed = [&](const char* g) {
    return timing_groups.empty() || std::find(timing_groups.begin(), timing_groups.end(), g) != timing_groups.end();
  };
  if (timed("elementwise")) mok::cuda::print_elementwise_timings();
  if (std::find(timing_groups.begin(), timing_groups.end(), "gemm_candidates") != timing_groups.end())
    mok::cuda::print_gemm_candidate_timings();
  if (timed("gemm")) mok::cuda::print_gemm_timings();
  else if (timed("routing")) mok::cuda::print_moe_routing_timings();
  if (timed("attention")) mok::cuda::print_attention_timings();
  if (timed("kittens")) mok::cuda::print_kitten_timings();
  if (timed("model")) mok::cuda::print_model_timings();
  if (timed("profile")) mok::cuda::print_model_profile({}, 40);
  if (!timed("sketch")) {
    std::printf("\n%s\n", failed ? "SOME CHECKS FAILED" : "all checks passed");
    return failed ? 1 : 0;
  }

  cublasHandle_t handle;
  cublasCreate(&handle);
  cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);  // true fp32, like the sketch kernel
  std::printf("\n%-20s %9s %11s %12s %11s %12s %12s\n", "sketch n×d→r", "fused ms", "gen+BLAS ms",
              "stored-Q ms", "gen+BLAS/Q", "X bytes", "P bytes (%)");
  struct Shape { int n, d, r; };
  for (const Shape& s : {Shape{16384, 1024, 32}, Shape{16384, 4096, 64}, Shape{65536, 4096, 128}}) {
    const int n = s.n, d = s.d, r = s.r;
    mok::cuda::DeviceBuffer<float> x(normals(size_t(n) * d, 1)), p(size_t(n) * r), qstored(normals(size_t(r) * d, 2));
    const float fused = mok::cuda::median_ms([&] { mok::cuda::sketch_project(x.data(), p.data(), n, d, r, 1, 2); });
    const float one = 1.f, zero = 0.f;
    // Row-major P(n,r) = X(n,d)·Q(r,d)ᵀ  ⇔  column-major Pᵀ(r,n) = Q·Xᵀ.
    const float blas = mok::cuda::median_ms([&] {
      cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, r, n, d, &one, qstored.data(), d, x.data(), d, &zero, p.data(), r);
    });
    mok::cuda::DeviceBuffer<float> qwork(size_t(r) * d);
    const float generated = mok::cuda::median_ms([&] {
      mok::cuda::sketch_generate(qwork.data(), r, d, 1, 2);
      cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, r, n, d, &one, qwork.data(), d, x.data(), d, &zero, p.data(), r);
    });
    const double xb = double(n) * d * 4, pb = double(n) * r * 4;
    char shape[64];
    std::snprintf(shape, sizeof shape, "%d×%d→%d", n, d, r);
    std::printf("%-20s %9.3f %11.3f %12.3f %11.2f %12.0f %9.0f (%.1f%%)\n", shape, fused, generated, blas,
                generated / blas, xb, pb, 100.0 * pb / xb);
  }
  cublasDestroy(handle);
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  std::printf("\n%s\n", failed ? "SOME CHECKS FAILED" : "all checks passed");
  return failed ? 1 : 0;
}
