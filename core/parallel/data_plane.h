#pragma once
// DataPlane: moves a rank's tensors between the ranks of a run, on the rank's device, beside
// the host control plane (Communicator) that carries counts, decisions and small figures.
//
//   all_to_all_rows   rows of a (rows, …) tensor to every peer; the per-peer row counts are
//                     known on both sides (the control plane exchanged them first)
//   all_to_all_rows_group  several such exchanges whose data do not depend on one another,
//                     started together where the transport can (NCCL: one group)
//   start_group / finish   such a group beside the compute (a GPU plane's transfer stream)
//   all_reduce_sum    f32/f64 in place, in the Communicator's fixed order (reduce-scatter, the
//                     owner of each chunk adds the R copies in rank order, accumulating in
//                     double and rounding once, then an all-gather): bitwise identical on
//                     every rank, across runs, and to the host reduction of the same values
//   broadcast         a tensor from `root` to every rank
//
// Every byte is counted in the control plane's CommStats by purpose and peer, as host
// messages are, so a run reports what moved between GPUs the way it reports host traffic.
// HostDataPlane serves CPU tensors through the Communicator itself (the same messages the
// dispatchers sent before there was a data plane); a device backend registers its own by
// transport (CUDA: "nccl", kernels/nccl_data_plane.h; "peer", copies between the GPUs of one
// process, kernels/peer_data_plane.h). make_data_plane picks by the context's device and the
// run's parallel.comm.
// Calls are collectives: every rank calls them in the same order. On a GPU they are ordered
// with the rank's compute stream and return before the data has arrived.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/backend/exec_context.h"
#include "core/parallel/communicator.h"

MOK_NN_BEGIN

class DataPlane {
 public:
  explicit DataPlane(Communicator& control) : control_(control) {}
  virtual ~DataPlane() = default;
  DataPlane(const DataPlane&) = delete;
  DataPlane& operator=(const DataPlane&) = delete;

  Communicator& control() const { return control_; }
  int rank() const { return control_.rank(); }
  int size() const { return control_.size(); }
  virtual const char* kind() const = 0;  // "host" | "nccl" | "peer"

  // send (Σ send_rows, …) in peer order: send_rows[p] rows to peer p. recv (Σ recv_rows, …)
  // in source order: recv_rows[s] rows from rank s, which must be what s sends here. Both of
  // one element type and row width, on this rank's device.
  void all_to_all_rows(const Tensor& send, std::span<const int64_t> send_rows, Tensor& recv,
                       std::span<const int64_t> recv_rows, CommPurpose purpose);

  // One exchange of a group: all_to_all_rows's arguments.
  struct RowMove {
    const Tensor* send;
    std::span<const int64_t> send_rows;
    Tensor* recv;
    std::span<const int64_t> recv_rows;
    CommPurpose purpose;
  };
  // The moves as one collective: none may need another's data (a destination sorting by the
  // entries it receives cannot be in their group). A GPU plane starts them together — one
  // launch and one latency instead of one per move, which is most of a small exchange's time
  // in a decode step — and counts each by its purpose, as if they had gone one by one.
  void all_to_all_rows_group(std::span<const RowMove> moves);

  // A group started beside the compute. On a GPU plane the moves run on the plane's transfer
  // stream, after the work the compute stream had queued when they started, while the
  // compute stream goes on with work that does not touch them (MoK's shadow experts while
  // the rows travel); finish() makes the compute stream wait for them. Until then the caller
  // neither writes the sent tensors nor reads the received ones; the Transfer holds both, so
  // releasing the caller's handles early frees nothing under the transfer. Host planes move
  // everything in start_group. One transfer at a time, and no other call of the plane while
  // it is in flight (collectives stay in one order on every rank).
  class Transfer {
   public:
    Transfer() = default;
    Transfer(Transfer&& other) noexcept;
    Transfer& operator=(Transfer&& other) noexcept;
    Transfer(const Transfer&) = delete;
    Transfer& operator=(const Transfer&) = delete;
    ~Transfer();  // finishes a transfer still in flight (an exception is unwinding)
    bool pending() const { return plane_ != nullptr; }

   private:
    friend class DataPlane;
    DataPlane* plane_ = nullptr;
    std::vector<Tensor> held_;  // views of the moves' tensors
  };
  [[nodiscard]] Transfer start_group(std::span<const RowMove> moves);
  void finish(Transfer& transfer);
  virtual void all_reduce_sum(Tensor& data, CommPurpose purpose) = 0;
  virtual void broadcast(Tensor& data, int root, CommPurpose purpose) = 0;

  // After the rank's device has caught up (a step's end): adds the device time the transfers
  // since the last call took to the control Communicator's wall seconds, for a plane whose
  // calls return before their data moves (on a GPU they share the compute stream, so that
  // time is all exposed). Host planes time their calls as they run and add nothing here.
  virtual void settle() {}

 protected:
  // Per-peer byte counts, already checked (the own block is as large sent as received);
  // addresses are the tensors' on this device.
  virtual void exchange(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                        std::span<const int64_t> recv_bytes, CommPurpose purpose) = 0;
  struct ByteMove {
    const uint8_t* send;
    std::vector<int64_t> send_bytes;
    uint8_t* recv;
    std::vector<int64_t> recv_bytes;
    CommPurpose purpose;
  };
  // A group of checked moves; by default one exchange after another.
  virtual void exchange_group(std::span<const ByteMove> moves);
  // start_group's and finish's transport: by default the group moves at once (exchange_group)
  // and nothing is left to wait for.
  virtual void start_exchange_group(std::span<const ByteMove> moves) { exchange_group(moves); }
  virtual void finish_exchange_group() {}
  // The purpose a profile names a group by: its largest move's (the rows, not their entries).
  static CommPurpose main_purpose(std::span<const ByteMove> moves);

 private:
  ByteMove checked(const RowMove& move) const;
  std::vector<ByteMove> checked_group(std::span<const RowMove> moves) const;
  void check_idle(const char* call) const;
  Communicator& control_;
  bool in_flight_ = false;  // a started group not finished yet
};

// CPU tensors, through the control Communicator's own messages.
class HostDataPlane final : public DataPlane {
 public:
  using DataPlane::DataPlane;
  const char* kind() const override { return "host"; }
  void all_reduce_sum(Tensor& data, CommPurpose purpose) override;
  void broadcast(Tensor& data, int root, CommPurpose purpose) override;

 protected:
  void exchange(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                std::span<const int64_t> recv_bytes, CommPurpose purpose) override;
};

// Bytes in one row of `t` (the product of every dimension after the first, times the element
// size; a 1-D tensor's rows are its elements).
int64_t row_bytes(const Tensor& t);

// The data plane for ranks computing under `context` over `transport` (parallel.comm: on a
// GPU "nccl" or "peer"; CPU ranks always get the host plane): a collective where the device's
// plane must bootstrap, e.g. NCCL's id handed out over `control`. Throws std::runtime_error
// when this build has no such transport for the device (a build without NCCL).
std::unique_ptr<DataPlane> make_data_plane(Communicator& control, const ExecContext& context,
                                           const std::string& transport);

// Whether this build has a `transport` data plane for `type` devices (CPU: always).
bool data_plane_available(DeviceType type, const std::string& transport);

// Device backends register their data planes at start-up (kernels/cuda_backend.cpp).
using DataPlaneFactory = std::function<std::unique_ptr<DataPlane>(Communicator&, const ExecContext&)>;
void register_data_plane(DeviceType type, const std::string& transport, DataPlaneFactory factory);

MOK_NN_END
