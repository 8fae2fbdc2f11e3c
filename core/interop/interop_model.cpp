#include "core/interop/interop_model.h"

namespace mok {

ModelOptions interop_model_options(const ExperimentConfig& c, int vocab_size) {
  ModelOptions o;
  o.model = c.model;
  o.kittens = KittensConfig{};  // exact: kittens change training memory, not the function
  o.routing = RoutingConfig{};  // dropless, plain top-k
  o.vocab_size = vocab_size;
  o.max_seq_len = c.data.seq_len;
  o.seed = c.seed;
  return o;
}

}  // namespace mok
