// The core's KittenPolicy and SavedLinearInput keepers behind the bridge (core_bridge.h).
#include "interop/torch/csrc/kitten_bridge.h"

#include <stdexcept>

#include "core/config/config_io.h"
#include "interop/torch/csrc/core_threads.h"

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

class Keeper final : public torchext::LinearInputKeeper {
 public:
  Keeper(std::unique_ptr<SavedLinearInput> saved, int layer, std::string kind)
      : saved_(std::move(saved)), layer_(layer), kind_(std::move(kind)) {}

  void save(const void* x, int64_t rows, int64_t d_in) override {
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
    torchext::CoreCall call;
    const Tensor dyt = host_copy(dy, rows, d_out);
    auto dw = std::make_shared<Tensor>(std::vector<int64_t>{d_in_, d_out});  // zeroed; dW += X̃ᵀ·dY
    saved_->accumulate_weight_grad(dyt, *dw, real(1));
    pending_ = false;
    return {dw, dw->raw(), dw->shape()};
  }

  int64_t held_bytes() const override { return saved_->held_bytes(); }
  double relative_error() const override { return saved_->last_relative_error(); }
  std::string describe() const override { return saved_->describe(); }

 private:
  std::unique_ptr<SavedLinearInput> saved_;
  int layer_;
  std::string kind_;
  int64_t d_in_ = 0, rows_ = 0;
  bool pending_ = false;
};

}  // namespace

KittenPolicyBridge::KittenPolicyBridge(const torchext::PolicySettings& s)
    : saved_(std::make_shared<KittenSavedInputPolicy>(kittens_config(s.assignments), checked_layers(s.layers), s.seed,
                                                      s.total_steps)) {}

std::unique_ptr<torchext::LinearInputKeeper> KittenPolicyBridge::make_keeper(int layer, const std::string& kind) {
  if (is_elementwise_kind(kind))
    throw std::invalid_argument("KittenPolicy: '" + kind + "' names an elementwise tensor; a linear input's kind "
                                "ends in '.input' (e.g. 'attn.qkv.input')");
  // The policy's choice at the current step (exact → nullptr: keep X as the reference does).
  // A subspace basis is the policy's, one per (layer, kind), so it lives across calls.
  std::unique_ptr<SavedLinearInput> saved = saved_->policy().make_linear_input(layer, kind);
  if (!saved) saved = make_exact_saved_linear_input();
  return std::make_unique<Keeper>(std::move(saved), layer, kind);
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
