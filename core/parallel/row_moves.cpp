#include "core/parallel/row_moves.h"

#include "core/backend/exec_context.h"

MOK_NN_BEGIN

Tensor upload_i32(const std::vector<int32_t>& values) {
  return ExecContext::current().upload(values.data(), {static_cast<int64_t>(values.size())}, DType::i32);
}

Tensor upload_real(const std::vector<real>& values) {
  return ExecContext::current().upload(values.data(), {static_cast<int64_t>(values.size())}, kRealDType);
}

Tensor gather_by(const Tensor& rows, const Tensor& index) {
  const ExecContext& cx = ExecContext::current();
  std::vector<int64_t> shape = rows.shape();
  shape[0] = index.numel();
  Tensor out = cx.empty(shape, rows.dtype());
  if (index.numel() == 0) return out;
  if (rows.rank() == 1)
    cx.ops().pairs_to_rows(rows, index, out);
  else
    cx.ops().gather_rows(rows, index, 1, out);
  return out;
}

Tensor gather_by(const Tensor& src, const std::vector<int64_t>& index, int div) {
  const ExecContext& cx = ExecContext::current();
  Tensor out = cx.empty({static_cast<int64_t>(index.size()), src.dim(1)}, src.dtype());
  if (index.empty()) return out;
  const std::vector<int32_t> idx(index.begin(), index.end());
  cx.ops().gather_rows(src, upload_i32(idx), div, out);
  return out;
}

Tensor row_block(const Tensor& t, int64_t first, int64_t count) {
  return t.view(first * t.dim(1), {count, t.dim(1)});
}

Tensor RowPermutation::apply(Tensor rows) const {
  if (forward.empty()) return rows;
  return gather_by(rows, forward);
}

Tensor RowPermutation::undo(Tensor rows) const {
  if (inverse.empty()) return rows;
  return gather_by(rows, inverse);
}

RowPermutation make_row_permutation(const std::vector<int32_t>& forward) {
  bool identity = true;
  for (size_t i = 0; i < forward.size() && identity; ++i) identity = forward[i] == static_cast<int32_t>(i);
  RowPermutation p;
  if (identity) return p;
  std::vector<int32_t> inverse(forward.size());
  for (size_t i = 0; i < forward.size(); ++i) inverse[static_cast<size_t>(forward[i])] = static_cast<int32_t>(i);
  p.forward = upload_i32(forward);
  p.inverse = upload_i32(inverse);
  return p;
}

MOK_NN_END
