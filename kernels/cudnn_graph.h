#pragma once
// A small C++ face on cuDNN's backend (graph) API: descriptors with owners, the tensor and
// operation nodes the attention graphs need, and a graph finalised into an execution plan
// run from a variant pack. Used by kernels/cudnn_attention.h; built only where cudnn.h and
// libcudnn were found (MOK_HAVE_CUDNN).
//
// A graph is a list of operations over tensors named by unique ids (uids). Tensors the caller
// passes in or reads back are "real" (a device address per run); "virtual" tensors live only
// inside the fused kernels cuDNN picks; "by value" tensors are host scalars. Every error
// throws std::runtime_error with cuDNN's own message.

#include <cudnn.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace mok::cuda::cudnn {

// One backend descriptor; destroyed with its last owner.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type);
  cudnnBackendDescriptor_t get() const { return d_.get(); }

  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values);
  void set_descriptor(cudnnBackendAttributeName_t name, const Descriptor& d);
  void set_descriptors(cudnnBackendAttributeName_t name, const std::vector<const Descriptor*>& ds);
  void finalize(const char* what);

 private:
  std::shared_ptr<std::remove_pointer_t<cudnnBackendDescriptor_t>> d_;
};

// Throws with cuDNN's message when status is not success.
void check(cudnnStatus_t status, const std::string& what);

// A tensor of the graph: dims and strides in elements (4-d here), its uid, its type.
struct TensorSpec {
  int64_t uid = 0;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  std::vector<int64_t> dims, strides;
  bool is_virtual = false;
  bool by_value = false;
};

// The graph under construction: nodes are added in execution order.
class Graph {
 public:
  // Real tensors: (dims, strides, type); uids are the caller's.
  const Descriptor& tensor(int64_t uid, cudnnDataType_t type, std::vector<int64_t> dims, std::vector<int64_t> strides);
  // A virtual tensor of a new uid.
  const Descriptor& virtual_tensor(cudnnDataType_t type, std::vector<int64_t> dims, std::vector<int64_t> strides);
  // A host scalar (float) of uid `uid`, dims 1×1×1×1.
  const Descriptor& scalar(int64_t uid, cudnnDataType_t type);

  // y = mode(x[, b[, t]]) in float math (bool math for comparisons); axis for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, const Descriptor& x, const Descriptor* b, const Descriptor& y,
                 const Descriptor* t = nullptr, int64_t axis = -1, cudnnDataType_t math = CUDNN_DATA_FLOAT);
  // y (…, 1) = reduce over the last dim of x.
  void reduction(cudnnReduceTensorOp_t op, const Descriptor& x, const Descriptor& y);
  // c = a · b over the last two dims, batched over the others; float accumulation.
  void matmul(const Descriptor& a, const Descriptor& b, const Descriptor& c);
  // y = x seen with other dims and strides (a transpose, here).
  void reshape(const Descriptor& x, const Descriptor& y);

  int op_count() const { return static_cast<int>(ops_.size()); }
  const std::vector<Descriptor>& ops() const { return ops_; }

 private:
  std::deque<Descriptor> tensors_;  // owners of every tensor descriptor handed out (stable references)
  std::vector<Descriptor> ops_;
  int64_t next_virtual_uid_ = 1000;
};

// A finalised plan of one graph on one handle: the first engine the heuristics rank that
// accepts the graph and is not marked non-deterministic (when required).
class Plan {
 public:
  Plan(cudnnHandle_t handle, const Graph& graph, bool require_deterministic, const char* name);
  int64_t workspace_bytes() const { return workspace_bytes_; }
  const std::string& engine() const { return engine_; }
  // Runs the plan on the handle's stream: uids with their device (or host scalar) addresses.
  void execute(cudnnHandle_t handle, const std::vector<int64_t>& uids, const std::vector<void*>& pointers,
               void* workspace) const;

 private:
  Graph graph_;                          // the nodes and tensors the plan was made from,
  std::unique_ptr<Descriptor> op_graph_;  // kept alive with it
  std::unique_ptr<Descriptor> plan_;
  int64_t workspace_bytes_ = 0;
  std::string engine_;
};

}  // namespace mok::cuda::cudnn
