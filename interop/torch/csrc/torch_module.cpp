// mok_torch._C: the core bridge (core_bridge.h) for Python, on torch tensors.
// The only file that includes torch. On the CPU a tensor's dtype picks the core build: float32 →
// the float core (mok_nn), float64 → the double core (mok_nn_f64). On a CUDA device (built with
// MOK_TORCH_CUDA, setup.py) the float core computes in the tensor's dtype, float32 or bfloat16,
// on torch's current stream's terms (csrc/device_call.h). The autograd glue is Python
// (mok_torch/kitten_linear.py, mok_torch/moe.py).
#include <torch/extension.h>

#ifdef MOK_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "interop/torch/csrc/core_bridge.h"

namespace {

using namespace mok::torchext;

torch::ScalarType scalar_type(bool f64) { return f64 ? torch::kFloat64 : torch::kFloat32; }

// Where a keeper or layer computes: the CPU (device -1), or cuda:device with bfloat16 or
// float32 activations (the Python side checks the dtype).
Place place_of(int device, bool bf16, const char* who) {
  if (device < 0) return {};
#ifdef MOK_TORCH_CUDA
  const std::string why = cuda_unavailable_reason(device);
  TORCH_CHECK(why.empty(), who, ": cuda:", device, " cannot be used by the core: ", why);
  return {device, bf16};
#else
  (void)bf16;
  TORCH_CHECK(false, who, ": this build of mok_torch._C is for CPU tensors (its torch had no CUDA when it was built)");
  return {};
#endif
}

void* current_stream(const Place& place) {
#ifdef MOK_TORCH_CUDA
  return c10::cuda::getCurrentCUDAStream(place.device).stream();
#else
  (void)place;
  return nullptr;
#endif
}

// The core's arrays: CPU tensors of its element type, or the place's device and dtype.
torch::Tensor core_input(const torch::Tensor& t, bool f64, const Place& place, int dims, const char* who) {
  if (place.device < 0) {
    TORCH_CHECK(t.device().is_cpu(), who, ": a tensor on ", t.device(), " for a module on the CPU");
    TORCH_CHECK(t.scalar_type() == scalar_type(f64), who, ": expected ", scalar_type(f64),
                " (the core's element type here), got ", t.scalar_type());
  } else {
    const torch::ScalarType want = place.bf16 ? torch::kBFloat16 : torch::kFloat32;
    TORCH_CHECK(t.device().is_cuda() && t.device().index() == place.device && t.scalar_type() == want, who,
                ": expected a ", want, " tensor on cuda:", place.device, " (where the module computes), got ",
                t.scalar_type(), " on ", t.device());
  }
  TORCH_CHECK(t.dim() == dims, who, ": expected ", dims, " dimensions, got ", t.dim());
  return t.contiguous();
}

// A core array as a torch tensor over the same memory; the tensor keeps the array's owner alive.
// Device arrays are the core's float32 parameters and gradients.
torch::Tensor wrap(const CoreArray& a, bool f64) {
  std::shared_ptr<void> owner = a.owner;
  torch::TensorOptions options = torch::TensorOptions().dtype(scalar_type(f64));
  if (a.device >= 0) options = options.device(torch::kCUDA, a.device);
  return torch::from_blob(a.data, a.shape, [owner](void*) {}, options);
}

struct PyKeeper {
  std::unique_ptr<LinearInputKeeper> keeper;
  bool f64;
  Place place;
  int64_t d_in = 0;

  void save(const torch::Tensor& x) {
    const torch::Tensor c = core_input(x, f64, place, 2, "KittenLinear input");
    d_in = c.size(1);
    if (place.device < 0) {
      keeper->save(c.data_ptr(), c.size(0), c.size(1));
    } else {
      keeper->save_device(c.data_ptr(), c.size(0), c.size(1), current_stream(place));
    }
  }
  // dW = X̃ᵀ·dy (d_in, d_out): the build's element type on the CPU, float32 on a GPU.
  torch::Tensor weight_grad(const torch::Tensor& dy) {
    const torch::Tensor c = core_input(dy, f64, place, 2, "KittenLinear output gradient");
    if (place.device < 0) return wrap(keeper->weight_grad(c.data_ptr(), c.size(0), c.size(1)), f64);
    torch::Tensor dw = torch::empty({d_in, c.size(1)}, c.options().dtype(torch::kFloat32));
    keeper->weight_grad_device(c.data_ptr(), c.size(0), c.size(1), dw.data_ptr(), current_stream(place));
    return dw;
  }
};

struct PyPolicy {
  std::shared_ptr<SavingPolicy> policy;
  bool f64;

  PyPolicy(std::vector<std::string> assignments, int layers, uint64_t seed, int64_t total_steps, bool f64_)
      : f64(f64_) {
    PolicySettings s{std::move(assignments), layers, seed, total_steps};
    policy = f64 ? make_saving_policy<double>(s) : make_saving_policy<float>(s);
  }
  // A keeper for tensors on cuda:device (-1: the CPU), bfloat16 or float32 there.
  PyKeeper make_keeper(int layer, const std::string& kind, int device, bool bf16) {
    const Place place = place_of(device, bf16, "KittenLinear");
    return {policy->make_keeper(layer, kind, place), f64, place};
  }
};

struct PyMoe {
  std::shared_ptr<MoeCore> core;
  bool f64;
  Place place;

  PyMoe(const MoeSettings& s, bool f64_, const PyPolicy* policy, const Place& place_)
      : f64(f64_), place(place_) {
    TORCH_CHECK(!policy || policy->f64 == f64, "MoKMoE: the kitten policy is for ", policy && policy->f64 ? "float64" : "float32",
                ", the layer for ", f64 ? "float64" : "float32");
    std::shared_ptr<SavingPolicy> p = policy ? policy->policy : nullptr;
    core = f64 ? make_moe_core<double>(s, p, place) : make_moe_core<float>(s, p, place);
  }
  std::vector<std::tuple<std::string, torch::Tensor, torch::Tensor>> parameters() {
    std::vector<std::tuple<std::string, torch::Tensor, torch::Tensor>> out;
    for (const MoeParameter& p : core->parameters()) out.emplace_back(p.name, wrap(p.value, f64), wrap(p.grad, f64));
    return out;
  }
  // (y, aux_loss, z_loss, load, dropped, call)
  py::tuple forward(const torch::Tensor& x, bool keep) {
    const torch::Tensor c = core_input(x, f64, place, 2, "MoKMoE input");
    if (place.device < 0) {
      MoeForwardResult r = core->forward(c.data_ptr(), c.size(0), keep);
      return py::make_tuple(wrap(r.y, f64), r.aux_loss, r.z_loss, r.load, r.dropped, r.call);
    }
    torch::Tensor y = torch::empty_like(c);
    MoeForwardResult r = core->forward_device(c.data_ptr(), c.size(0), keep, y.data_ptr(), current_stream(place));
    return py::make_tuple(y, r.aux_loss, r.z_loss, r.load, r.dropped, r.call);
  }
  torch::Tensor backward(const torch::Tensor& dy, double loss_scale, uint64_t call) {
    const torch::Tensor c = core_input(dy, f64, place, 2, "MoKMoE output gradient");
    if (place.device < 0) return wrap(core->backward(c.data_ptr(), c.size(0), loss_scale, call), f64);
    torch::Tensor dx = torch::empty_like(c);
    core->backward_device(c.data_ptr(), c.size(0), loss_scale, call, dx.data_ptr(), current_stream(place));
    return dx;
  }
};

py::dict memory(bool f64) {
  py::dict d;
  for (const auto& [name, bytes] : f64 ? core_memory<double>() : core_memory<float>()) d[py::str(name)] = bytes;
  return d;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "MoK Workbench core bridge: kitten saved inputs and the MoE layer on torch CPU and CUDA tensors";

  py::class_<PyKeeper>(m, "Keeper", "What one call of a linear layer keeps of its input for dW")
      .def("save", &PyKeeper::save, py::arg("x"), "Keep (a compact copy of) x (rows, d_in)")
      .def("weight_grad", &PyKeeper::weight_grad, py::arg("dy"),
           "X̃ᵀ·dy (d_in, d_out) for dy (rows, d_out); frees the copy")
      .def_property_readonly("held_bytes", [](const PyKeeper& k) { return k.keeper->held_bytes(); })
      .def_property_readonly("relative_error", [](const PyKeeper& k) { return k.keeper->relative_error(); })
      .def("describe", [](const PyKeeper& k) { return k.keeper->describe(); });

  py::class_<PyPolicy>(m, "KittenPolicy", "The core's KittenPolicy for one element type")
      .def(py::init<std::vector<std::string>, int, uint64_t, int64_t, bool>(), py::arg("assignments"),
           py::arg("layers"), py::arg("seed"), py::arg("total_steps"), py::arg("float64"))
      .def("make_keeper", &PyPolicy::make_keeper, py::arg("layer"), py::arg("kind"), py::arg("device") = -1,
           py::arg("bf16") = false, "A keeper for one call: on the CPU (device -1) or cuda:device (bfloat16 or float32)")
      .def("set_step", [](PyPolicy& p, int64_t step) { p.policy->set_step(step); }, py::arg("step"))
      .def_property_readonly("step", [](const PyPolicy& p) { return p.policy->step(); })
      .def("choice", [](const PyPolicy& p, int layer, const std::string& kind) { return p.policy->choice(layer, kind); },
           py::arg("layer"), py::arg("kind"))
      .def("metrics", [](const PyPolicy& p) { return p.policy->metrics(); });

  py::class_<PyMoe>(m, "MoeCore", "One core MoE layer (router + stacked SwiGLU experts) on this rank")
      .def(py::init([](int64_t d_model, int experts, int64_t expert_hidden, int top_k, bool shared_expert,
                       double aux_loss_coef, double z_loss_coef, double capacity_factor, double init_std,
                       double out_std, uint64_t seed, int layer, bool f64, const PyPolicy* policy,
                       int device, bool bf16) {
             MoeSettings s;
             s.d_model = d_model;
             s.experts = experts;
             s.expert_hidden = expert_hidden;
             s.top_k = top_k;
             s.shared_expert = shared_expert;
             s.aux_loss_coef = aux_loss_coef;
             s.z_loss_coef = z_loss_coef;
             s.capacity_factor = capacity_factor;
             s.init_std = init_std;
             s.out_std = out_std;
             s.seed = seed;
             s.layer = layer;
             return std::make_unique<PyMoe>(s, f64, policy, place_of(device, bf16, "MoKMoE"));
           }),
           py::arg("d_model"), py::arg("experts"), py::arg("expert_hidden"), py::arg("top_k"),
           py::arg("shared_expert"), py::arg("aux_loss_coef"), py::arg("z_loss_coef"), py::arg("capacity_factor"),
           py::arg("init_std"), py::arg("out_std"), py::arg("seed"), py::arg("layer"), py::arg("float64"),
           py::arg("policy") = nullptr, py::arg("device") = -1, py::arg("bf16") = false)
      .def("parameters", &PyMoe::parameters, "[(name, value, grad)]: tensors over the core's own storage")
      .def("forward", &PyMoe::forward, py::arg("x"), py::arg("keep"),
           "(y, aux_loss, z_loss, load, dropped, call) for x (rows, d)")
      .def("backward", &PyMoe::backward, py::arg("dy"), py::arg("loss_scale"), py::arg("call"),
           "dx (rows, d); the parameters' grad tensors then hold this call's gradients");

  m.def("cuda_built", [] {
#ifdef MOK_TORCH_CUDA
    return has_cuda();
#else
    return false;
#endif
  }, "Whether this build runs on CUDA tensors (_C built for a torch with CUDA, the bridge with the kernels)");
  m.def("set_num_threads", &set_core_threads, py::arg("threads"), "Threads of the core's parallel loops");
  m.def("get_num_threads", &core_threads);
  m.def("memory", &memory, py::arg("float64") = false,
        "The core's tracked bytes by category: {'saved_activations.live': …, '….peak': …}");
  m.def("reset_memory_peaks", [](bool f64) { f64 ? reset_core_memory_peaks<double>() : reset_core_memory_peaks<float>(); },
        py::arg("float64") = false);
}
