#include "core/parallel/data_plane.h"

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

MOK_NN_BEGIN

int64_t row_bytes(const Tensor& t) {
  int64_t w = static_cast<int64_t>(dtype_size(t.dtype()));
  for (int i = 1; i < t.rank(); ++i) w *= t.dim(i);
  return w;
}

DataPlane::ByteMove DataPlane::checked(const RowMove& m) const {
  const int R = size();
  const Tensor& send = *m.send;
  Tensor& recv = *m.recv;
  if (static_cast<int>(m.send_rows.size()) != R || static_cast<int>(m.recv_rows.size()) != R)
    throw std::invalid_argument("DataPlane::all_to_all_rows: need one row count per rank (" + std::to_string(R) + ")");
  if (send.dtype() != recv.dtype() || row_bytes(send) != row_bytes(recv))
    throw std::invalid_argument("DataPlane::all_to_all_rows: send " + send.describe() + " and receive " +
                                recv.describe() + " differ in element type or row width");
  const int64_t w = row_bytes(send);
  ByteMove out{static_cast<const uint8_t*>(send.raw()), std::vector<int64_t>(R), static_cast<uint8_t*>(recv.raw()),
               std::vector<int64_t>(R), m.purpose};
  int64_t srows = 0, rrows = 0;
  for (int p = 0; p < R; ++p) {
    if (m.send_rows[p] < 0 || m.recv_rows[p] < 0)
      throw std::invalid_argument("DataPlane::all_to_all_rows: negative count");
    out.send_bytes[p] = m.send_rows[p] * w;
    out.recv_bytes[p] = m.recv_rows[p] * w;
    srows += m.send_rows[p];
    rrows += m.recv_rows[p];
  }
  const int64_t have_s = send.rank() ? send.dim(0) : 0, have_r = recv.rank() ? recv.dim(0) : 0;
  if (srows > have_s || rrows > have_r)
    throw std::invalid_argument("DataPlane::all_to_all_rows: " + std::to_string(srows) + " rows to send from " +
                                send.describe() + ", " + std::to_string(rrows) + " to receive into " +
                                recv.describe());
  const int me = rank();
  if (m.send_rows[me] != m.recv_rows[me])
    throw std::logic_error("DataPlane: the own block is " + std::to_string(m.send_rows[me]) + " rows to send but " +
                           std::to_string(m.recv_rows[me]) + " to receive");
  return out;
}

void DataPlane::check_idle(const char* call) const {
  if (in_flight_)
    throw std::logic_error(std::string("DataPlane::") + call + " while a started group is in flight (finish it first)");
}

std::vector<DataPlane::ByteMove> DataPlane::checked_group(std::span<const RowMove> moves) const {
  std::vector<ByteMove> out;
  out.reserve(moves.size());
  for (const RowMove& m : moves) out.push_back(checked(m));
  return out;
}

void DataPlane::all_to_all_rows(const Tensor& send, std::span<const int64_t> send_rows, Tensor& recv,
                                std::span<const int64_t> recv_rows, CommPurpose purpose) {
  check_idle("all_to_all_rows");
  const ByteMove m = checked({&send, send_rows, &recv, recv_rows, purpose});
  exchange(m.send, m.send_bytes, m.recv, m.recv_bytes, m.purpose);
}

void DataPlane::all_to_all_rows_group(std::span<const RowMove> moves) {
  check_idle("all_to_all_rows_group");
  const std::vector<ByteMove> checked_moves = checked_group(moves);
  if (checked_moves.size() == 1) {
    const ByteMove& m = checked_moves[0];
    exchange(m.send, m.send_bytes, m.recv, m.recv_bytes, m.purpose);
  } else if (!checked_moves.empty()) {
    exchange_group(checked_moves);
  }
}

DataPlane::Transfer DataPlane::start_group(std::span<const RowMove> moves) {
  check_idle("start_group");
  const std::vector<ByteMove> checked_moves = checked_group(moves);
  Transfer t;
  if (checked_moves.empty()) return t;
  for (const RowMove& m : moves) {
    t.held_.push_back(m.send->view(0, m.send->shape()));
    t.held_.push_back(m.recv->view(0, m.recv->shape()));
  }
  start_exchange_group(checked_moves);
  in_flight_ = true;
  t.plane_ = this;
  return t;
}

void DataPlane::finish(Transfer& transfer) {
  if (!transfer.pending()) return;
  if (transfer.plane_ != this) throw std::logic_error("DataPlane::finish: a transfer of another plane");
  transfer.plane_ = nullptr;
  in_flight_ = false;
  finish_exchange_group();
  transfer.held_.clear();  // after the compute stream waits for the transfer: no block is reused under it
}

DataPlane::Transfer::Transfer(Transfer&& other) noexcept
    : plane_(std::exchange(other.plane_, nullptr)), held_(std::move(other.held_)) {}

DataPlane::Transfer& DataPlane::Transfer::operator=(Transfer&& other) noexcept {
  if (this != &other) {
    if (plane_) {
      try {
        plane_->finish(*this);
      } catch (...) {  // see the destructor
      }
    }
    plane_ = std::exchange(other.plane_, nullptr);
    held_ = std::move(other.held_);
  }
  return *this;
}

DataPlane::Transfer::~Transfer() {
  if (!plane_) return;
  try {
    plane_->finish(*this);
  } catch (...) {  // unwinding already; the plane's own error is the one reported
  }
}

CommPurpose DataPlane::main_purpose(std::span<const ByteMove> moves) {
  auto sent = [](const ByteMove& m) {
    int64_t b = 0;
    for (int64_t x : m.send_bytes) b += x;
    return b;
  };
  const ByteMove* main = &moves[0];
  for (const ByteMove& m : moves)
    if (sent(m) > sent(*main)) main = &m;
  return main->purpose;
}

void DataPlane::exchange_group(std::span<const ByteMove> moves) {
  for (const ByteMove& m : moves) exchange(m.send, m.send_bytes, m.recv, m.recv_bytes, m.purpose);
}

void HostDataPlane::exchange(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                             std::span<const int64_t> recv_bytes, CommPurpose purpose) {
  control().all_to_all_bytes(send, send_bytes, recv, recv_bytes, purpose);
}

void HostDataPlane::all_reduce_sum(Tensor& data, CommPurpose purpose) {
  if (!data.is_cpu()) throw std::logic_error("HostDataPlane: " + data.describe() + " is not on the CPU");
  if (data.dtype() == DType::f32)
    control().all_reduce_sum(data.ptr<float>(), data.numel(), purpose);
  else if (data.dtype() == DType::f64)
    control().all_reduce_sum(data.ptr<double>(), data.numel(), purpose);
  else
    throw std::invalid_argument("DataPlane::all_reduce_sum: f32 or f64, not " + data.describe());
}

void HostDataPlane::broadcast(Tensor& data, int root, CommPurpose purpose) {
  control().broadcast(data.raw(), data.bytes(), root, purpose);
}

namespace {
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::pair<DeviceType, std::string>, DataPlaneFactory>& registry() {
  static std::map<std::pair<DeviceType, std::string>, DataPlaneFactory> r;
  return r;
}
}  // namespace

void register_data_plane(DeviceType type, const std::string& transport, DataPlaneFactory factory) {
  std::lock_guard lock(registry_mutex());
  registry()[{type, transport}] = std::move(factory);
}

bool data_plane_available(DeviceType type, const std::string& transport) {
  if (type == DeviceType::cpu) return true;
  std::lock_guard lock(registry_mutex());
  return registry().count({type, transport}) > 0;
}

std::unique_ptr<DataPlane> make_data_plane(Communicator& control, const ExecContext& context,
                                           const std::string& transport) {
  if (context.is_cpu()) return std::make_unique<HostDataPlane>(control);
  DataPlaneFactory make;
  {
    std::lock_guard lock(registry_mutex());
    auto it = registry().find({context.device().type, transport});
    if (it != registry().end()) make = it->second;
  }
  if (!make)
    throw std::runtime_error("no '" + transport + "' data plane between " + context.device().str() +
                             " ranks in this build" +
                             (transport == "nccl" ? " (it was built without NCCL; parallel.comm: peer needs none)"
                                                  : std::string()));
  return make(control, context);
}

MOK_NN_END
