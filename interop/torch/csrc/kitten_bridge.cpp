// The core's KittenPolicy and SavedLinearInput keepers behind the bridge (core_bridge.h).
#include "interop/torch/csrc/kitten_bridge.h"

#include <stdexcept>

#include "core/config/config_io.h"
#include "interop/torch/csrc/core_threads.h"
#ifndef MOK_REAL_DOUBLE
#include "interop/torch/csrc/device_call.h"
#endif

MOK_NN_BEGIN

namespace {

// The kitten settings through the config's own parser and checks: "method=rsvd",
// "kinds={\"\": {method: lowbit, bits: 4}}", … each applied as `--set kittens.<assignment>`.
KittensConfig kittens_config(const std::vector<std::string>& assignments) {
  ExperimentConfig c;
  for (size_t i = 0; i < assignments.size(); ++i) {
    try {
      apply_override(c, "kittens." + assignments[i], static_cast<int>(i) + 1);
    } catch (const ConfigError& e) {
      throw std::invalid_argument("kitten setting '" + assignments[i] + "': " + e.message);
    }
  }
  if (const std::string problem = kitten_config_problem(c.kittens); !problem.empty())
    throw std::invalid_argument(problem);
  return c.kittens;
}

int checked_layers(int layers) {
  if (layers < 1) throw std::invalid_argument("KittenPolicy: layers must be at least 1");
  return layers;
}

// x (rows, cols) of `real` copied into a core tensor.
Tensor host_copy(const void* x, int64_t rows, int64_t cols) {
  Tensor t = Tensor::uninitialized({rows, cols});
  t.copy_from_host(x, t.bytes());
  return t;
}

[[maybe_unused]] void refuse_float64_device() {
  throw std::invalid_argument("mok_torch: float64 runs on the CPU only; on a GPU the core computes in float32 or "
                              "bfloat16");
}

class Keeper final : public torchext::LinearInputKeeper {
 public:
  Keeper(std::unique_ptr<SavedLinearInput> saved, int layer, std::string kind, torchext::Place place)
      : saved_(std::move(saved)), layer_(layer), kind_(std::move(kind)), place_(place) {}

  void save(const void* x, int64_t rows, int64_t d_in) override {
    on_host("save");
    torchext::CoreCall call;
    // The copy is the keeper's to take over (kept as is when exact).
    saved_->save_owned(host_copy(x, rows, d_in), MemTag{MemCategory::saved_activations, layer_, kind_});
    d_in_ = d_in;
    rows_ = rows;
    pending_ = true;
  }

  torchext::CoreArray weight_grad(const void* dy, int64_t rows, int64_t d_out) override {
    if (!pending_)
      throw std::logic_error("KittenLinear: the saved copy of this call's input was used by an earlier backward "
                             "(or nothing was saved); backward twice through one call is not supported");
    if (rows != rows_) throw std::invalid_argument("KittenLinear: dy has another row count than the saved input");
    on_host("weight_grad");
    torchext::CoreCall call;
    const Tensor dyt = host_copy(dy, rows, d_out);
    auto dw = std::make_shared<Tensor>(std::vector<int64_t>{d_in_, d_out});  // zeroed; dW += X̃ᵀ·dY
    saved_->accumulate_weight_grad(dyt, *dw, real(1));
    pending_ = false;
    return {dw, dw->raw(), dw->shape()};
  }

  void save_device(const void* x, int64_t rows, int64_t d_in, void* stream) override {
#ifdef MOK_REAL_DOUBLE
    (void)x, (void)rows, (void)d_in, (void)stream;
    refuse_float64_device();
#else
    on_device("save");
    DeviceCall call(place_, stream);
    // x is the caller's memory for this call only: save() copies or quantizes it, never keeps it.
    const Tensor xt = call.borrow(x, {rows, d_in}, call.activation_dtype());
    saved_->save(xt, MemTag{MemCategory::saved_activations, layer_, kind_});
    d_in_ = d_in;
    rows_ = rows;
    pending_ = true;
#endif
  }

  void weight_grad_device(const void* dy, int64_t rows, int64_t d_out, void* dw, void* stream) override {
#ifdef MOK_REAL_DOUBLE
    (void)dy, (void)rows, (void)d_out, (void)dw, (void)stream;
    refuse_float64_device();
#else
    if (!pending_)
      throw std::logic_error("KittenLinear: the saved copy of this call's input was used by an earlier backward "
                             "(or nothing was saved); backward twice through one call is not supported");
    if (rows != rows_) throw std::invalid_argument("KittenLinear: dy has another row count than the saved input");
    on_device("weight_grad");
    DeviceCall call(place_, stream);
    const Tensor dyt = call.borrow(dy, {rows, d_out}, call.activation_dtype());
    Tensor dwt = call.borrow(dw, {d_in_, d_out}, DType::f32);  // the caller's, float32
    dwt.zero();                                                 // dW = X̃ᵀ·dY
    saved_->accumulate_weight_grad(dyt, dwt, real(1));
    pending_ = false;
#endif
  }

  int64_t held_bytes() const override { return saved_->held_bytes(); }
  double relative_error() const override {
#ifndef MOK_REAL_DOUBLE
    if (place_.device >= 0) {
      DeviceCall call(place_);  // the measurement is on the device: read it there
      return saved_->last_relative_error();
    }
#endif
    return saved_->last_relative_error();
  }
  std::string describe() const override { return saved_->describe(); }

 private:
  void on_host(const char* what) const {
    if (place_.device >= 0)
      throw std::invalid_argument(std::string("KittenLinear: ") + what + " of host memory by a keeper made for cuda:" +
                                  std::to_string(place_.device));
  }
  void on_device(const char* what) const {
    if (place_.device < 0)
      throw std::invalid_argument(std::string("KittenLinear: ") + what + " of device memory by a keeper made for the CPU");
  }

  std::unique_ptr<SavedLinearInput> saved_;
  int layer_;
  std::string kind_;
  torchext::Place place_;
  int64_t d_in_ = 0, rows_ = 0;
  bool pending_ = false;
};

}  // namespace

KittenPolicyBridge::KittenPolicyBridge(const torchext::PolicySettings& s)
    : saved_(std::make_shared<KittenSavedInputPolicy>(kittens_config(s.assignments), checked_layers(s.layers), s.seed,
                                                      s.total_steps)) {}

void KittenPolicyBridge::check_place(const torchext::Place& place) const {
  if (place.device < 0) return;
#ifdef MOK_REAL_DOUBLE
  refuse_float64_device();
#endif
}

std::unique_ptr<torchext::LinearInputKeeper> KittenPolicyBridge::make_keeper(int layer, const std::string& kind,
                                                                            torchext::Place place) {
  check_place(place);
  if (is_elementwise_kind(kind))
    throw std::invalid_argument("KittenPolicy: '" + kind + "' names an elementwise tensor; a linear input's kind "
                                "ends in '.input' (e.g. 'attn.qkv.input')");
  // The policy's choice at the current step (exact → nullptr: keep X as the reference does).
  // A subspace basis is the policy's, one per (layer, kind), so it lives across calls.
  std::unique_ptr<SavedLinearInput> saved = saved_->policy().make_linear_input(layer, kind);
  if (!saved) saved = make_exact_saved_linear_input();
  return std::make_unique<Keeper>(std::move(saved), layer, kind, place);
}

void KittenPolicyBridge::set_step(int64_t step) {
  torchext::CoreCall call;
  saved_->set_step(step);
}

int64_t KittenPolicyBridge::step() const { return saved_->policy().step(); }

std::string KittenPolicyBridge::choice(int layer, const std::string& kind) const {
  const SavedTensorChoice c = saved_->policy().choose_linear(layer, kind);
  std::string s = saved_tensor_method_name(c.method);
  if (c.method == SavedTensorMethod::lowbit) s += " " + std::to_string(c.bits);
  if (c.is_low_rank()) s += " r=" + std::to_string(c.rank);
  if (c.is_low_rank() && c.factor_bits) s += " factor_bits=" + std::to_string(c.factor_bits);
  return s;
}

std::vector<std::pair<std::string, double>> KittenPolicyBridge::metrics() const { return saved_->policy().metrics(); }

MOK_NN_END

template <>
std::shared_ptr<mok::torchext::SavingPolicy> mok::torchext::make_saving_policy<mok::real>(const PolicySettings& s) {
  return std::make_shared<mok::KittenPolicyBridge>(s);
}
