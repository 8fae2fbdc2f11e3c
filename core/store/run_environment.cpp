#include "core/store/run_environment.h"

#include <dlfcn.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace mok {
namespace {

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// The first "model name" of /proc/cpuinfo (x86); "" where there is none.
std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (trimmed(line.substr(0, colon)) == "model name") return trimmed(line.substr(colon + 1));
  }
  return {};
}

// The BLAS is looked up by symbol in the running process rather than called directly, so the
// probe works whatever BLAS the build was linked with (and names it when it is not OpenBLAS).
void probe_blas(RunEnvironment& env) {
  using TextFn = char* (*)();
  const auto corename = reinterpret_cast<TextFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const auto config = reinterpret_cast<TextFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  if (corename && config) {
    const char* core = corename();
    const char* text = config();
    env.blas_kernel = core ? trimmed(core) : "";
    env.blas_config = text ? trimmed(text) : "";
    // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64": name and version.
    std::istringstream words(env.blas_config);
    std::string name, version;
    words >> name >> version;
    env.blas_library = name.empty() ? "OpenBLAS" : name + (version.empty() ? "" : " " + version);
    return;
  }
  Dl_info info{};
  void* gemm = dlsym(RTLD_DEFAULT, "cblas_sgemm");
  if (gemm && dladdr(gemm, &info) != 0 && info.dli_fname) {
    const std::string path = info.dli_fname;
    env.blas_library = path.substr(path.find_last_of('/') + 1);
  } else {
    env.blas_library = "unknown";
  }
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

}  // namespace

RunEnvironment probe_run_environment() {
  RunEnvironment env;
  env.recorded = true;
  env.cpu_model = read_cpu_model();
  if (env.cpu_model.empty()) env.cpu_model = "unknown";
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  env.cpu_count = online > 0 ? static_cast<int>(online) : 0;
  probe_blas(env);
  return env;
}

const std::vector<EnvironmentTextField>& environment_text_fields() {
  static const std::vector<EnvironmentTextField> fields = {
      {"cpu_model", "CPU", &RunEnvironment::cpu_model, true},
      {"blas_library", "BLAS", &RunEnvironment::blas_library, true},
      {"blas_kernel", "BLAS kernel", &RunEnvironment::blas_kernel, true},
      // The full OpenBLAS build line: its kernel and version are compared above already.
      {"blas_config", "BLAS build", &RunEnvironment::blas_config, false},
      {"gpu_model", "GPU", &RunEnvironment::gpu_model, true},
      {"gpu_driver", "GPU driver", &RunEnvironment::gpu_driver, true},
      {"cuda_version", "CUDA", &RunEnvironment::cuda_version, true},
      {"cublas_version", "cuBLAS", &RunEnvironment::cublas_version, true},
      {"nccl_version", "NCCL", &RunEnvironment::nccl_version, true},
  };
  return fields;
}

std::vector<EnvironmentDifference> environment_differences(const RunEnvironment& base, const RunEnvironment& other) {
  std::vector<EnvironmentDifference> out;
  if (!base.recorded || !other.recorded) {
    out.push_back({"environment", "environment", base.recorded ? "recorded" : "not recorded",
                   other.recorded ? "recorded" : "not recorded"});
    return out;
  }
  for (const EnvironmentTextField& f : environment_text_fields()) {
    if (!f.hardware) continue;
    const std::string& a = base.*f.member;
    const std::string& b = other.*f.member;
    if (a != b) out.push_back({f.key, f.label, or_dash(a), or_dash(b)});
  }
  return out;
}

std::string describe_differences(const std::vector<EnvironmentDifference>& differences) {
  std::string out;
  for (const EnvironmentDifference& d : differences) {
    if (!out.empty()) out += "; ";
    if (d.key == "environment") {  // one side or both not recorded
      out += d.base == d.other ? "environments not recorded"
             : d.other == "not recorded" ? "environment not recorded"
                                         : "baseline's environment not recorded";
    } else {
      out += d.label + " " + d.other + " vs " + d.base;
    }
  }
  return out;
}

std::string environment_summary(const RunEnvironment& env) {
  if (!env.recorded) return "not recorded";
  std::string s = or_dash(env.cpu_model);
  if (env.cpu_count > 0) s += " · " + std::to_string(env.cpu_count) + (env.cpu_count == 1 ? " CPU" : " CPUs");
  if (env.threads > 0) s += " · " + std::to_string(env.threads) + (env.threads == 1 ? " thread" : " threads");
  s += " · " + or_dash(env.blas_library);
  if (!env.blas_kernel.empty()) s += ", kernel " + env.blas_kernel;
  if (!env.gpu_model.empty()) {
    s += " · " + env.gpu_model;
    if (!env.gpu_driver.empty()) s += ", driver " + env.gpu_driver;
    if (!env.cuda_version.empty()) s += ", CUDA " + env.cuda_version;
    if (!env.cublas_version.empty()) s += ", cuBLAS " + env.cublas_version;
    if (!env.nccl_version.empty()) s += ", NCCL " + env.nccl_version;
  }
  return s;
}

}  // namespace mok
