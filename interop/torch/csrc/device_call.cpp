// CUDA contexts of the bridge and the stream order of its calls (device_call.h).
#include "interop/torch/csrc/device_call.h"

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#ifdef MOK_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda_backend.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_ops.h"
#endif

MOK_NN_BEGIN

namespace {

#ifdef MOK_HAVE_CUDA
struct PlaceState {
  std::unique_ptr<ExecContext> context;
  cudaStream_t stream = nullptr;       // the context's (core's) stream
  cudaEvent_t caller_ready = nullptr;  // recorded on the caller's stream at a call's start
  cudaEvent_t core_done = nullptr;     // recorded on the core's stream at its end
};

std::mutex& places_mutex() {
  static std::mutex m;
  return m;
}
// Never destroyed: tensors over their allocators may outlive static destruction at exit.
std::map<std::pair<int, bool>, PlaceState*>& places() {
  static auto* m = new std::map<std::pair<int, bool>, PlaceState*>;
  return *m;
}

// The CUDA backend, registered at the first device use (as the CLIs do at start).
void ensure_cuda_backend() {
  static std::once_flag registered;
  std::call_once(registered, [] { mok::cuda::register_cuda_backend(); });
}

PlaceState& place_state(const torchext::Place& place) {
  if (place.device < 0) throw std::logic_error("mok_torch: a device call for the host");
  ensure_cuda_backend();
  std::lock_guard lock(places_mutex());
  PlaceState*& s = places()[{place.device, place.bf16}];
  if (!s) {
    auto state = std::make_unique<PlaceState>();
    state->context = make_exec_context(Device::cuda(place.device), place.bf16 ? DType::bf16 : DType::f32);
    state->stream = dynamic_cast<mok::cuda::CudaOps&>(state->context->ops()).stream();
    MOK_CUDA_CHECK(cudaEventCreateWithFlags(&state->caller_ready, cudaEventDisableTiming));
    MOK_CUDA_CHECK(cudaEventCreateWithFlags(&state->core_done, cudaEventDisableTiming));
    s = state.release();
  }
  return *s;
}

int current_device() {  // -1 when none can be asked (device_context then says why)
  int d = -1;
  return cudaGetDevice(&d) == cudaSuccess ? d : -1;
}
#else
[[noreturn]] void no_cuda() {
  throw std::runtime_error("mok_torch: this build of the bridge has no CUDA kernels (built without nvcc); "
                           "rebuild it with MOK_CUDA=ON to run on CUDA tensors");
}
int current_device() { return -1; }
#endif

}  // namespace

ExecContext& device_context(const torchext::Place& place) {
#ifdef MOK_HAVE_CUDA
  return *place_state(place).context;
#else
  (void)place;
  no_cuda();
#endif
}

DeviceCall::DeviceCall(const torchext::Place& place, void* caller_stream)
    : previous_device_(current_device()), context_(device_context(place)), scope_(context_),
      caller_stream_(caller_stream), has_caller_stream_(true) {
#ifdef MOK_HAVE_CUDA
  // The calls of one place are serialised (call_), so its two events serve them in turn: a
  // wait takes the event's state when it is queued, so recording it again later is safe.
  PlaceState& s = place_state(place);
  place_ = &s;
  MOK_CUDA_CHECK(cudaEventRecord(s.caller_ready, static_cast<cudaStream_t>(caller_stream_)));
  MOK_CUDA_CHECK(cudaStreamWaitEvent(s.stream, s.caller_ready, 0));
#endif
}

DeviceCall::DeviceCall(const torchext::Place& place)
    : previous_device_(current_device()), context_(device_context(place)), scope_(context_) {
#ifdef MOK_HAVE_CUDA
  place_ = &place_state(place);
#endif
}

DeviceCall::~DeviceCall() {
#ifdef MOK_HAVE_CUDA
  // Also after an exception: what the core queued is done before the caller's next work.
  auto* s = static_cast<PlaceState*>(place_);
  if (has_caller_stream_) {
    if (cudaEventRecord(s->core_done, s->stream) == cudaSuccess)
      cudaStreamWaitEvent(static_cast<cudaStream_t>(caller_stream_), s->core_done, 0);
  } else {
    cudaStreamSynchronize(s->stream);
  }
  if (previous_device_ >= 0) cudaSetDevice(previous_device_);
#endif
}

Tensor DeviceCall::borrow(const void* data, std::vector<int64_t> shape, DType dtype) const {
  return Tensor::borrow(const_cast<void*>(data), std::move(shape), dtype, context_.allocator());
}

MOK_NN_END

bool mok::torchext::has_cuda() {
#ifdef MOK_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::string mok::torchext::cuda_unavailable_reason(int device) {
#ifdef MOK_HAVE_CUDA
  // Asked at every keeper a module makes: the answer, which does not change, is kept per device.
  static std::mutex mutex;
  static std::map<int, std::string> answers;
  std::lock_guard lock(mutex);
  if (auto it = answers.find(device); it != answers.end()) return it->second;
  ensure_cuda_backend();
  std::string why = device_unavailable_reason(DeviceType::cuda);
  if (why.empty()) {
    why = "cuda:" + std::to_string(device) + " does not exist here";
    for (const DeviceDescription& d : list_devices())
      if (d.device == Device::cuda(device)) why.clear();
  }
  return answers[device] = why;
#else
  (void)device;
  return "this build of the bridge has no CUDA kernels (built without nvcc)";
#endif
}
