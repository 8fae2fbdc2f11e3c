// One core MoE layer (core/model/moe_layer.h) behind the bridge (core_bridge.h): the router,
// the stacked SwiGLU experts and the local dispatcher, forward and backward, on this rank.
#include <cstring>
#include <stdexcept>

#include "core/model/moe_layer.h"
#include "interop/torch/csrc/core_threads.h"
#include "interop/torch/csrc/kitten_bridge.h"
#ifndef MOK_REAL_DOUBLE
#include "interop/torch/csrc/device_call.h"
#endif

MOK_NN_BEGIN

namespace {

MoeConfig moe_config(const torchext::MoeSettings& s, bool recompute) {
  if (s.d_model < 1 || s.expert_hidden < 1 || s.experts < 1)
    throw std::invalid_argument("MoKMoE: d_model, experts and expert_hidden must be positive");
  MoeConfig c;
  c.d = s.d_model;
  c.experts = s.experts;
  c.top_k = s.top_k;
  c.hidden = s.expert_hidden;
  c.shared_expert = s.shared_expert;
  c.aux_loss_coef = s.aux_loss_coef;
  c.z_loss_coef = s.z_loss_coef;
  c.capacity_factor = s.capacity_factor;
  c.recompute = recompute;
  return c;
}

KittenPolicyBridge* kitten_policy_of(const std::shared_ptr<torchext::SavingPolicy>& policy) {
  if (!policy) return nullptr;
  auto* k = dynamic_cast<KittenPolicyBridge*>(policy.get());
  if (!k) throw std::invalid_argument("MoKMoE: the kitten policy was made for the other element type");
  return k;
}

// Made under the context of `place` (make_moe_core): the parameters live on its device.
class MoeBridge final : public torchext::MoeCore, public std::enable_shared_from_this<MoeBridge> {
 public:
  MoeBridge(const torchext::MoeSettings& s, std::shared_ptr<torchext::SavingPolicy> policy, torchext::Place place)
      : place_(place),
        policy_(std::move(policy)),
        layer_("moe", moe_config(s, kitten_policy_of(policy_) && kitten_wants_recompute(kitten_policy_of(policy_)->config())),
               s.init_std, s.out_std, s.seed, s.layer),
        d_(s.d_model), experts_(s.experts), hidden_(s.expert_hidden) {
    if (KittenPolicyBridge* k = kitten_policy_of(policy_)) install(&k->saved_input_policy());
  }

  std::vector<torchext::MoeParameter> parameters() override {
    std::vector<torchext::MoeParameter> out;
    Parameter& router = layer_.router().proj().weight();
    out.push_back({"w_router", array(router.value), array(router.grad)});
    // The experts' weights are blocks of two stacks (core/model/grouped_swiglu.h); expert e's
    // Parameters are views of block e, so the stacks start at expert 0's.
    const ExpertBank& bank = layer_.experts();
    auto stack = [&](bool up, bool grad) {
      const int64_t rows = up ? d_ : hidden_, cols = up ? 2 * hidden_ : d_;
      auto block = [&](int e) -> const Tensor& {
        const Parameter& p = up ? bank.experts[e]->up().weight() : bank.experts[e]->down().weight();
        return grad ? p.grad : p.value;
      };
      const auto* base = static_cast<const uint8_t*>(block(0).raw());
      for (int e = 1; e < experts_; ++e)
        if (static_cast<const uint8_t*>(block(e).raw()) != base + e * rows * cols * static_cast<int64_t>(sizeof(real)))
          throw std::logic_error("MoKMoE: the experts' weights are not one stack");
      return torchext::CoreArray{shared_from_this(), const_cast<uint8_t*>(base), {experts_, rows, cols}, place_.device};
    };
    out.push_back({"w_up", stack(true, false), stack(true, true)});
    out.push_back({"w_down", stack(false, false), stack(false, true)});
    if (SwiGluMlp* s = layer_.shared_expert()) {
      out.push_back({"shared_w_up", array(s->up().weight().value), array(s->up().weight().grad)});
      out.push_back({"shared_w_down", array(s->down().weight().value), array(s->down().weight().grad)});
    }
    return out;
  }

  torchext::MoeForwardResult forward(const void* x, int64_t rows, bool keep) override {
    torchext::CoreCall call;
    Tensor xt = Tensor::uninitialized({rows, d_});
    xt.copy_from_host(x, xt.bytes());
    MoeStats stats;
    auto y = std::make_shared<Tensor>(layer_.forward(xt, keep, &stats));
    torchext::MoeForwardResult r = forward_result(stats, rows, keep);
    r.y = {y, y->raw(), y->shape()};
    return r;
  }

  torchext::CoreArray backward(const void* dy, int64_t rows, double loss_scale, uint64_t call) override {
    check_kept(call, rows);
    torchext::CoreCall call_scope;
    for (const torchext::MoeParameter& p : parameters())  // this call's gradients alone
      std::memset(p.grad.data, 0, static_cast<size_t>(numel(p.grad.shape)) * sizeof(real));
    Tensor dyt = Tensor::uninitialized({rows, d_});
    dyt.copy_from_host(dy, dyt.bytes());
    auto dx = std::make_shared<Tensor>(layer_.backward(dyt, static_cast<real>(loss_scale)));
    kept_call_ = 0;
    return {dx, dx->raw(), dx->shape()};
  }

#ifdef MOK_REAL_DOUBLE
  torchext::MoeForwardResult forward_device(const void*, int64_t, bool, void*, void*) override {
    throw std::invalid_argument("MoKMoE: float64 runs on the CPU only");
  }
  void backward_device(const void*, int64_t, double, uint64_t, void*, void*) override {
    throw std::invalid_argument("MoKMoE: float64 runs on the CPU only");
  }
#else
  torchext::MoeForwardResult forward_device(const void* x, int64_t rows, bool keep, void* y, void* stream) override {
    on_device("forward");
    DeviceCall call(place_, stream);
    Ops& ops = call.context().ops();
    ops.refresh_compute_copies(weights());  // bf16 copies of the values the caller's optimizer wrote
    // x is the caller's memory for this call only: the layer copies what it keeps.
    const Tensor xt = call.borrow(x, {rows, d_}, call.activation_dtype());
    MoeStats stats;
    const Tensor yt = layer_.forward(xt, keep, &stats);
    copy_out(call, yt, rows, y, "y");
    return forward_result(stats, rows, keep);
  }

  void backward_device(const void* dy, int64_t rows, double loss_scale, uint64_t call, void* dx,
                       void* stream) override {
    check_kept(call, rows);
    on_device("backward");
    DeviceCall device_call(place_, stream);
    for (Parameter* p : weights()) p->grad.zero();  // this call's gradients alone
    const Tensor dyt = device_call.borrow(dy, {rows, d_}, device_call.activation_dtype());
    const Tensor dxt = layer_.backward(dyt, static_cast<real>(loss_scale));
    copy_out(device_call, dxt, rows, dx, "dx");
    kept_call_ = 0;
  }
#endif

 private:
  // A forward's losses, load and drops (read from the device where the layer runs there); a
  // forward with gradients becomes the one call whose saved tensors a backward may use.
  torchext::MoeForwardResult forward_result(const MoeStats& stats, int64_t rows, bool keep) {
    torchext::MoeForwardResult r;
    const RouterLosses::Values losses = stats.losses.read();
    r.aux_loss = losses.aux;
    r.z_loss = losses.z;
    r.load = stats.load;
    r.dropped = stats.dropped;
    if (keep) {
      kept_call_ = ++calls_;
      kept_rows_ = rows;
      r.call = kept_call_;
    }
    return r;
  }
  void check_kept(uint64_t call, int64_t rows) const {
    if (call == 0 || call != kept_call_)
      throw std::logic_error(
          "MoKMoE: backward of a call whose saved tensors are gone: a later forward with gradients replaced them "
          "(the core layer keeps one call's), or a backward used them already");
    if (rows != kept_rows_) throw std::invalid_argument("MoKMoE: dy has another row count than the forward");
  }
#ifndef MOK_REAL_DOUBLE
  // A result of the layer into the caller's device memory (rows, d), on the core's stream.
  void copy_out(DeviceCall& call, const Tensor& result, int64_t rows, void* out, const char* what) const {
    if (result.dtype() != call.activation_dtype() || result.numel() != rows * d_)
      throw std::logic_error(std::string("MoKMoE: the layer's ") + what + " is " + result.describe());
    call.context().allocator().copy_within(out, result.raw(), result.bytes());
  }
#endif
  void on_device(const char* what) const {
    if (place_.device < 0) throw std::invalid_argument(std::string("MoKMoE: ") + what + " of device memory by a layer on the CPU");
  }
  // Every weight of the layer as the core's Parameters (experts: per-expert views of the stacks).
  std::vector<Parameter*> weights() {
    std::vector<Parameter*> out{&layer_.router().proj().weight()};
    for (auto& e : layer_.experts().experts) {
      if (!e) continue;  // another rank's expert (not with the local dispatcher)
      out.push_back(&e->up().weight());
      out.push_back(&e->down().weight());
    }
    if (SwiGluMlp* s = layer_.shared_expert()) {
      out.push_back(&s->up().weight());
      out.push_back(&s->down().weight());
    }
    return out;
  }
  // As the model's blocks do (core/model/transformer_block.cpp): every linear input and
  // elementwise tensor of the layer is kept as the policy says.
  void install(SavedInputPolicy* p) {
    layer_.router().proj().set_policy(p);
    for (auto& e : layer_.experts().experts) {
      e->up().set_policy(p);
      e->down().set_policy(p);
      e->set_saved_policy(p);
    }
    layer_.experts().grouped->set_policy(p);
    if (SwiGluMlp* s = layer_.shared_expert()) {
      s->up().set_policy(p);
      s->down().set_policy(p);
      s->set_saved_policy(p);
    }
  }
  torchext::CoreArray array(const Tensor& t) {
    return {shared_from_this(), const_cast<void*>(t.raw()), t.shape(), place_.device};
  }
  static int64_t numel(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }

  torchext::Place place_;
  std::shared_ptr<torchext::SavingPolicy> policy_;  // kept alive: the layer holds its SavedInputPolicy
  MoeLayer layer_;
  int64_t d_;
  int experts_;
  int64_t hidden_;
  uint64_t calls_ = 0;      // forwards with keep so far
  uint64_t kept_call_ = 0;  // the one whose tensors the layer holds (0: none)
  int64_t kept_rows_ = 0;
};

}  // namespace

MOK_NN_END

template <>
std::shared_ptr<mok::torchext::MoeCore> mok::torchext::make_moe_core<mok::real>(const MoeSettings& s,
                                                                              std::shared_ptr<SavingPolicy> policy,
                                                                              Place place) {
  if (place.device < 0) {
    mok::torchext::CoreCall call;  // the constructor draws the parameters with parallel_for
    return std::make_shared<mok::MoeBridge>(s, std::move(policy), place);
  }
#ifdef MOK_REAL_DOUBLE
  throw std::invalid_argument("MoKMoE: float64 runs on the CPU only; on a GPU the core computes in float32 or bfloat16");
#else
  if (mok::KittenPolicyBridge* k = mok::kitten_policy_of(policy)) k->check_place(place);
  // Built under the place's context: parameters on its device (fp32 values and gradients, bf16
  // compute copies when it computes in bf16); waits for the uploads before torch reads them.
  mok::DeviceCall call(place);
  return std::make_shared<mok::MoeBridge>(s, std::move(policy), place);
#endif
}
