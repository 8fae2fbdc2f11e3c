#pragma once
// The extension's view of the core: plain C++ with neither torch nor the core's `real` in it.
//
// Why a bridge: the core's numeric code is built twice (mok_nn with real = float, mok_nn_f64
// with real = double, core/real.h), so each piece here is compiled twice too (csrc/f64/), and
// the one translation unit that includes torch (torch_module.cpp, slow to compile) picks the
// build from the tensor's dtype: float32 → <float>, float64 → <double>.
//
// Memory on the host: inputs are host arrays of the build's element type that the caller owns
// for the call; they are copied into core tensors (x, dy: one copy each). Outputs are core
// tensors handed over without a copy as CoreArray (torch wraps `data` and keeps `owner` alive).
// Parameters stay in the core's storage; torch sees them as views (MoeCore::parameters).
//
// On a CUDA device (the float build only; the *_device calls): inputs are the caller's device
// memory, read in place (core tensors that borrow it for the call, Tensor::borrow); outputs are
// written into device memory the caller allocated; parameters and their gradients stay in the
// core's device storage. Each call is ordered with the caller's stream (device_call.h).

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mok::torchext {

// An array the core owns: valid while `owner` lives. On the host (device -1) of the build's
// element type; on CUDA device `device` float32 (parameters and their gradients).
struct CoreArray {
  std::shared_ptr<void> owner;
  void* data = nullptr;
  std::vector<int64_t> shape;
  int device = -1;
};

// Where a keeper or a layer computes. device -1: the host, in the build's element type.
// device ≥ 0: that CUDA device (float build only), activations in bfloat16 (bf16) or float32;
// weights, their gradients and dW float32. Device calls take the caller's CUDA stream
// (cudaStream_t as void*): the core's work waits for what that stream queued before the call,
// and the stream waits for the core's work before anything queued after it.
struct Place {
  int device = -1;
  bool bf16 = false;
};

// What one call of a linear layer keeps of its input X for dW (core/kittens/saved_linear_input.h):
// exact, a low-bit copy, or low-rank factors, as the policy chose at that call's step.
class LinearInputKeeper {
 public:
  virtual ~LinearInputKeeper() = default;
  // Keeps (a compact copy of) x (rows, d_in).
  virtual void save(const void* x, int64_t rows, int64_t d_in) = 0;
  // X̃ᵀ·dy (d_in, d_out) for dy (rows, d_out), then frees the copy; a second call throws
  // (the copy is used up, as torch's saved tensors are without retain_graph).
  virtual CoreArray weight_grad(const void* dy, int64_t rows, int64_t d_out) = 0;
  // The same on the keeper's CUDA device: x (rows, d_in) and dy (rows, d_out) of its
  // activation type, dw (d_in, d_out) float32, all the caller's device memory; dw is overwritten.
  virtual void save_device(const void* x, int64_t rows, int64_t d_in, void* stream) = 0;
  virtual void weight_grad_device(const void* dy, int64_t rows, int64_t d_out, void* dw, void* stream) = 0;
  virtual int64_t held_bytes() const = 0;
  // ‖X − X̃‖/‖X‖ measured at save (0 when exact; −1 when the method does not measure it).
  // On a device it waits for the device (the measurement is read from there).
  virtual double relative_error() const = 0;
  virtual std::string describe() const = 0;  // e.g. "lowbit 8bit", "rsvd r=16", "exact"
};

// The settings of a KittenPolicy, in the experiment config's own syntax.
struct PolicySettings {
  std::vector<std::string> assignments;  // "key=value" under `kittens.` (docs/kittens.md)
  int layers = 1;                        // layer indices the policy keeps ranks and errors for
  uint64_t seed = 1234;                  // sketches and stochastic rounding are keyed by it
  int64_t total_steps = 1000;            // horizon of the linear / cosine rank schedules
};

// The core's KittenPolicy (core/kittens/kitten_policy.h) for one element type.
class SavingPolicy {
 public:
  virtual ~SavingPolicy() = default;
  // A keeper for one call of linear layer (layer, kind) at the current step, computing at
  // `place` (a device: the methods that run there, else std::invalid_argument naming the key).
  virtual std::unique_ptr<LinearInputKeeper> make_keeper(int layer, const std::string& kind, Place place) = 0;
  virtual void set_step(int64_t step) = 0;
  virtual int64_t step() const = 0;
  // How (layer, kind) is kept now: "exact", "lowbit 8", "sketch r=16", …
  virtual std::string choice(int layer, const std::string& kind) const = 0;
  // kittens/rank/layer<L> and kittens/error/layer<L>, as the trainer reports them.
  virtual std::vector<std::pair<std::string, double>> metrics() const = 0;
};

// Throws std::invalid_argument naming the key when a setting is unknown or out of range.
template <typename Real>
std::shared_ptr<SavingPolicy> make_saving_policy(const PolicySettings& settings);

// One MoE layer (core/model/moe_layer.h) on this rank: router + stacked SwiGLU experts.
struct MoeSettings {
  int64_t d_model = 0;
  int experts = 8;
  int top_k = 2;
  int64_t expert_hidden = 256;
  bool shared_expert = false;
  double aux_loss_coef = 0.01;
  double z_loss_coef = 0.001;
  double capacity_factor = 0.0;  // 0 → dropless
  double init_std = 0.02;
  double out_std = 0.02;         // w_down's init (the model uses init_std/√(2·layers))
  uint64_t seed = 1234;          // parameters are drawn by name from it (core/model/init.h)
  int layer = 0;                 // the layer index of saved-activation tags and kitten choices
};

struct MoeParameter {
  std::string name;  // w_router (d, E), w_up (E, d, 2f), w_down (E, f, d), shared_w_up, shared_w_down
  CoreArray value;   // the core's own storage: writes are seen by the next forward
  CoreArray grad;    // the last backward's gradient
};

struct MoeForwardResult {
  CoreArray y;                // (rows, d)
  double aux_loss = 0.0;      // weighted by aux_loss_coef
  double z_loss = 0.0;        // weighted by z_loss_coef
  std::vector<int64_t> load;  // (E) pairs routed per expert, before capacity
  int64_t dropped = 0;        // pairs dropped by the capacity
  uint64_t call = 0;          // which forward this was (for backward's check); 0 when not kept
};

class MoeCore {
 public:
  virtual ~MoeCore() = default;
  virtual std::vector<MoeParameter> parameters() = 0;
  // x (rows, d). keep: save what backward needs (the layer holds one call's tensors).
  virtual MoeForwardResult forward(const void* x, int64_t rows, bool keep) = 0;
  // dy (rows, d) for the forward numbered `call`; returns dx (rows, d) and leaves this call's
  // parameter gradients in the parameters' grad arrays (overwritten, not accumulated).
  // loss_scale: the gradient of the objective w.r.t. aux_loss + z_loss. Throws when a later
  // forward with keep replaced that call's saved tensors, or a backward already used them.
  virtual CoreArray backward(const void* dy, int64_t rows, double loss_scale, uint64_t call) = 0;
  // The same on the layer's CUDA device: x, dy of its activation type (rows, d); y and dx
  // (rows, d) written into the caller's device memory (result.y stays empty).
  virtual MoeForwardResult forward_device(const void* x, int64_t rows, bool keep, void* y, void* stream) = 0;
  virtual void backward_device(const void* dy, int64_t rows, double loss_scale, uint64_t call, void* dx,
                               void* stream) = 0;
};

// policy: how the layer keeps its saved tensors (null: exactly); must be of the same Real.
// place: where its parameters live and it computes (a device: the float build only).
template <typename Real>
std::shared_ptr<MoeCore> make_moe_core(const MoeSettings& settings, std::shared_ptr<SavingPolicy> policy,
                                       Place place = {});

// Live and peak bytes by category (parameters, gradients, saved_activations, workspace, …)
// of the core's memory tracker for one element type: {"saved_activations.live", bytes}, …,
// over host and devices, and all categories on CUDA devices: {"cuda.live", …}, {"cuda.peak", …}.
template <typename Real>
std::vector<std::pair<std::string, int64_t>> core_memory();
template <typename Real>
void reset_core_memory_peaks();

// Whether this bridge was built with the CUDA kernels, and why a device cannot be used ("" when
// it can): no CUDA in the build, no driver, no such GPU.
bool has_cuda();
std::string cuda_unavailable_reason(int device);

// Threads of the core's parallel_for (results do not depend on it, core/util/thread_pool.h).
void set_core_threads(int threads);
int core_threads();

}  // namespace mok::torchext
