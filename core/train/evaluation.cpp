#include "core/train/evaluation.h"

#include <cmath>
#include <vector>

#include "core/data/batch_sampler.h"
#include "core/model/language_model.h"

namespace mok {

ValidationResult evaluate_validation(const ExperimentConfig& cfg, const TokenDataset& data, LanguageModel& model,
                                     RankContext& rc, const StepCancellation& cancel) {
  const int seq = cfg.data.seq_len;
  const int micro = cfg.train.batch / cfg.train.grad_accum;
  const int rows = rc.shard_rows(micro);
  const size_t at = static_cast<size_t>(rc.shard_begin(micro)) * seq;  // this rank's first row
  std::vector<int32_t> tokens(static_cast<size_t>(micro) * seq), targets(tokens.size());  // (micro, seq)
  double loss_sum = 0.0;
  int64_t n = 0;
  for (int b = 0; b < cfg.train.eval_batches; ++b) {
    if (b > 0) cancel.check();
    val_batch(data, b, micro, seq, tokens.data(), targets.data());
    const ForwardStats st = model.evaluate(tokens.data() + at, targets.data() + at, rows, seq);
    loss_sum += st.loss * static_cast<double>(st.tokens);
    n += st.tokens;
  }
  if (rc.parallel()) {
    double sums[2] = {loss_sum, static_cast<double>(n)};
    rc.comm->all_reduce_sum(sums, 2, CommPurpose::control);
    loss_sum = sums[0];
    n = static_cast<int64_t>(sums[1]);
  }
  ValidationResult v;
  v.loss = n > 0 ? loss_sum / static_cast<double>(n) : 0.0;
  v.bpb = bits_per_byte(v.loss, n, data.val_bytes_per_token());
  v.ppl = std::exp(v.loss);
  return v;
}

}  // namespace mok
