#include "kernels/cudnn_graph.h"

#include <stdexcept>

namespace mok::cuda::cudnn {
namespace {

// The handle attributes of an operation graph and of a plan are marked deprecated in cuDNN 9
// headers but still required by the 9.x libraries; named by value to keep the build quiet.
constexpr auto kOperationGraphHandle = static_cast<cudnnBackendAttributeName_t>(800);
constexpr auto kExecutionPlanHandle = static_cast<cudnnBackendAttributeName_t>(400);

std::string last_error() {
  char message[1024] = {};
  cudnnGetLastErrorString(message, sizeof message);
  return message;
}

}  // namespace

void check(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  std::string message = "cuDNN: " + what + ": " + cudnnGetErrorString(status);
  const std::string detail = last_error();
  if (!detail.empty()) message += " (" + detail + ")";
  throw std::runtime_error(message);
}

Descriptor::Descriptor(cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t d = nullptr;
  check(cudnnBackendCreateDescriptor(type, &d), "create descriptor " + std::to_string(static_cast<int>(type)));
  d_.reset(d, [](cudnnBackendDescriptor_t p) { cudnnBackendDestroyDescriptor(p); });
}

void Descriptor::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                     const void* values) {
  check(cudnnBackendSetAttribute(get(), name, type, count, values),
        "set attribute " + std::to_string(static_cast<int>(name)));
}

void Descriptor::set_descriptor(cudnnBackendAttributeName_t name, const Descriptor& d) {
  cudnnBackendDescriptor_t raw = d.get();
  set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

void Descriptor::set_descriptors(cudnnBackendAttributeName_t name, const std::vector<const Descriptor*>& ds) {
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const Descriptor* d : ds) raw.push_back(d->get());
  set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(raw.size()), raw.data());
}

void Descriptor::finalize(const char* what) { check(cudnnBackendFinalize(get()), std::string("finalize ") + what); }

namespace {

Descriptor make_tensor(const TensorSpec& s) {
  Descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &s.type);
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, static_cast<int64_t>(s.dims.size()), s.dims.data());
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, static_cast<int64_t>(s.strides.size()), s.strides.data());
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &s.uid);
  const int64_t alignment = 16;
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  if (s.is_virtual) {
    const bool v = true;
    t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v);
  }
  if (s.by_value) {
    const bool v = true;
    t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &v);
  }
  t.finalize("tensor");
  return t;
}

}  // namespace

const Descriptor& Graph::tensor(int64_t uid, cudnnDataType_t type, std::vector<int64_t> dims,
                                std::vector<int64_t> strides) {
  tensors_.push_back(make_tensor({uid, type, std::move(dims), std::move(strides), false, false}));
  return tensors_.back();
}

const Descriptor& Graph::virtual_tensor(cudnnDataType_t type, std::vector<int64_t> dims, std::vector<int64_t> strides) {
  tensors_.push_back(make_tensor({next_virtual_uid_++, type, std::move(dims), std::move(strides), true, false}));
  return tensors_.back();
}

const Descriptor& Graph::scalar(int64_t uid, cudnnDataType_t type) {
  tensors_.push_back(make_tensor({uid, type, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true}));
  return tensors_.back();
}

void Graph::pointwise(cudnnPointwiseMode_t mode, const Descriptor& x, const Descriptor* b, const Descriptor& y,
                      const Descriptor* t, int64_t axis, cudnnDataType_t math) {
  Descriptor pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math);
  if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
  pw.finalize("pointwise");
  Descriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
  if (b) op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  if (t) op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  op.finalize("pointwise operation");
  ops_.push_back(std::move(op));
}

void Graph::reduction(cudnnReduceTensorOp_t reduce, const Descriptor& x, const Descriptor& y) {
  Descriptor r(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce);
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  r.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &math);
  r.finalize("reduction");
  Descriptor op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
  op.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
  op.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r);
  op.finalize("reduction operation");
  ops_.push_back(std::move(op));
}

void Graph::matmul(const Descriptor& a, const Descriptor& b, const Descriptor& c) {
  Descriptor m(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  m.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &math);
  m.finalize("matmul");
  Descriptor op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
  op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
  op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
  op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_DESC, m);
  op.finalize("matmul operation");
  ops_.push_back(std::move(op));
}

void Graph::reshape(const Descriptor& x, const Descriptor& y) {
  Descriptor op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
  op.set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
  op.finalize("reshape operation");
  ops_.push_back(std::move(op));
}

Plan::Plan(cudnnHandle_t handle, const Graph& graph, bool require_deterministic, const char* name)
    : graph_(graph), op_graph_(std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)) {
  Descriptor& op_graph = *op_graph_;
  std::vector<const Descriptor*> ops;
  for (const Descriptor& op : graph_.ops()) ops.push_back(&op);
  op_graph.set_descriptors(CUDNN_ATTR_OPERATIONGRAPH_OPS, ops);
  op_graph.set(kOperationGraphHandle, CUDNN_TYPE_HANDLE, 1, &handle);
  op_graph.finalize(name);

  std::string refusals;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Descriptor heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, op_graph);
    heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    try {
      heur.finalize("engine heuristics");
    } catch (const std::exception& e) {
      refusals += std::string(" [") + e.what() + "]";
      continue;
    }
    int64_t count = 0;
    check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                   nullptr),
          "count engine configs");
    std::vector<Descriptor> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(configs.back().get());
    }
    int64_t got = 0;
    check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                   raw.data()),
          "engine configs");
    for (int64_t i = 0; i < got; ++i) {
      Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
      cudnnBackendDescriptor_t engine_raw = engine.get();
      int64_t one = 0;
      if (cudnnBackendGetAttribute(raw[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &one,
                                   &engine_raw) != CUDNN_STATUS_SUCCESS)
        continue;
      int64_t index = -1, n_notes = 0;
      cudnnBackendGetAttribute(engine_raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &one, &index);
      cudnnBackendNumericalNote_t notes[32];
      cudnnBackendGetAttribute(engine_raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, 32, &n_notes,
                               notes);
      bool nondeterministic = false;
      for (int64_t j = 0; j < n_notes; ++j) nondeterministic |= notes[j] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
      if (require_deterministic && nondeterministic) {
        refusals += " [engine " + std::to_string(index) + ": non-deterministic]";
        continue;
      }
      auto plan = std::make_unique<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan->set(kExecutionPlanHandle, CUDNN_TYPE_HANDLE, 1, &handle);
      cudnnBackendDescriptor_t cfg = raw[i];
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
      if (cudnnBackendFinalize(plan->get()) != CUDNN_STATUS_SUCCESS) {
        refusals += " [engine " + std::to_string(index) + ": " + last_error() + "]";
        continue;
      }
      check(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &one,
                                     &workspace_bytes_),
            "plan workspace size");
      plan_ = std::move(plan);
      engine_ = "engine " + std::to_string(index) + (mode == CUDNN_HEUR_MODE_A ? "" : " (fallback list)");
      return;
    }
  }
  throw std::runtime_error(std::string("cuDNN: no engine runs the ") + name + " graph:" + refusals);
}

void Plan::execute(cudnnHandle_t handle, const std::vector<int64_t>& uids, const std::vector<void*>& pointers,
                   void* workspace) const {
  if (uids.size() != pointers.size()) throw std::invalid_argument("cuDNN plan: uids and pointers differ in count");
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()), uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(pointers.size()),
           pointers.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize("variant pack");
  check(cudnnBackendExecute(handle, plan_->get(), pack.get()), "execute");
}

}  // namespace mok::cuda::cudnn
