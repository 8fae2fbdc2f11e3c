#pragma once
// RunEnvironment: the hardware and numeric libraries a run computed on, kept with the run in
// the store. Same machine and same BLAS kernel family → bitwise identical metrics, whatever
// the thread count; another CPU model or kernel family → the same figures to float precision
// only (docs/training.md, "Reproducibility"). Recording it lets a researcher see why two
// runs of one config differ in their last digits.
//
//   RunEnvironment env = probe_run_environment();          // this process: CPU and BLAS
//   for (const EnvironmentDifference& d : environment_differences(base, other)) ...

#include <string>
#include <vector>

namespace mok {

struct RunEnvironment {
  bool recorded = false;     // false: the run predates environments in the store (schema < 2)
  // CPU
  std::string cpu_model;     // /proc/cpuinfo "model name", e.g. "AMD EPYC 9654 96-Core Processor"
  int cpu_count = 0;         // logical CPUs online
  int threads = 0;           // compute threads per rank (parallel.threads); 0 = unknown
  // CPU BLAS, which computes every GEMM of the CPU path
  std::string blas_library;  // "OpenBLAS 0.3.21"; for another BLAS the file name of its library
  std::string blas_kernel;   // OpenBLAS kernel family (openblas_get_corename), e.g. "Haswell"; "" unknown
  std::string blas_config;   // openblas_get_config(), verbatim
  // GPU: filled by the CUDA path for device runs; empty on CPU runs
  std::string gpu_model;       // e.g. "NVIDIA H200"
  std::string gpu_driver;      // driver version, e.g. "570.86.15"
  std::string cuda_version;    // CUDA runtime, e.g. "13.0"
  std::string cublas_version;  // e.g. "13.0.0"
  std::string nccl_version;    // e.g. "2.27.3"; "" when NCCL is not used
};

// This process's CPU and BLAS (threads and the GPU fields left for the caller). With a BLAS
// other than OpenBLAS the kernel family stays "" and the library is named by its file.
RunEnvironment probe_run_environment();

// The text fields, in store column order: key (column and JSON name), label (for people),
// and whether a difference in it makes results differ beyond rounding order (hardware).
struct EnvironmentTextField {
  const char* key;
  const char* label;
  std::string RunEnvironment::*member;
  bool hardware;
};
const std::vector<EnvironmentTextField>& environment_text_fields();

// What makes `other` non-bitwise-comparable with `base`: each hardware field that differs
// (CPU model, BLAS library and kernel family, GPU model, driver, CUDA, cuBLAS, NCCL). The
// thread count is not one: results are bitwise the same for any thread count. When either
// environment was not recorded the answer is one entry with key "environment", since
// nothing can be told.
struct EnvironmentDifference {
  std::string key;    // EnvironmentTextField::key, or "environment"
  std::string label;  // e.g. "BLAS kernel"
  std::string base;   // the baseline's value ("-" when empty)
  std::string other;
};
std::vector<EnvironmentDifference> environment_differences(const RunEnvironment& base, const RunEnvironment& other);

// "BLAS kernel Haswell vs Cooperlake; CPU Intel Xeon vs AMD EPYC" (other's value first);
// "environment not recorded" (or "baseline's environment …", "environments …") when unknown.
std::string describe_differences(const std::vector<EnvironmentDifference>& differences);

// One line for people: "AMD EPYC · 2 CPUs · 1 thread · OpenBLAS 0.3.21, kernel Cooperlake",
// with " · NVIDIA H200, driver …, CUDA …, cuBLAS …, NCCL …" for GPU runs; "not recorded"
// for runs from before environments were kept.
std::string environment_summary(const RunEnvironment& env);

}  // namespace mok
