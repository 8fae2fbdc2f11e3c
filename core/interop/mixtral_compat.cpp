#include "core/interop/mixtral_compat.h"

#include "core/model/language_model.h"

#include <cstdio>

namespace mok {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::vector<std::string> mixtral_export_problems(const ExperimentConfig& c) {
  std::vector<std::string> out;
  const ModelConfig& m = c.model;
  if (m.experts <= 0) {
    out.push_back("model.experts is 0 (every layer a dense MLP): Mixtral has experts in every layer");
  } else {
    std::vector<bool> mask;
    try {
      mask = moe_layer_mask(m);
    } catch (const std::exception& e) {
      out.push_back(e.what());
    }
    std::string dense;
    for (size_t l = 0; l < mask.size(); ++l)
      if (!mask[l]) dense += (dense.empty() ? "" : ", ") + std::to_string(l);
    if (!dense.empty())
      out.push_back("model.moe_layers '" + m.moe_layers + "' makes layer(s) " + dense +
                    " dense MLPs: Mixtral has experts in every layer (Qwen2-MoE's mlp_only_layers could "
                    "hold them; mok does not write that layout)");
  }
  if (m.shared_expert)
    out.push_back("model.shared_expert: Mixtral has no shared expert, and Qwen2-MoE scales its shared expert by "
                  "sigmoid(x·w) without a bias, which cannot equal mok's ungated one");
  if (m.heads < 1 || m.d_model % m.heads) out.push_back("model.d_model is not a multiple of model.heads");
  return out;
}

std::vector<std::string> mixtral_export_notes(const ExperimentConfig& c) {
  std::vector<std::string> out;
  if (c.kittens.mode != "exact")
    out.push_back("kittens (mode " + c.kittens.mode + ", method " + c.kittens.method +
                  "): compact saved activations change training memory only; nothing to export");
  if (c.routing.capacity_factor > 0)
    out.push_back("routing.capacity_factor " + number(c.routing.capacity_factor) +
                  " dropped (token, expert) pairs in training and evaluation; the export routes dropless, as "
                  "mok generate and Transformers do");
  if (c.routing.policy == "locality" || c.routing.locality_aux_coef > 0)
    out.push_back("locality-aware routing (routing.policy " + c.routing.policy +
                  ", locality_aux_coef) acts only over several expert-parallel ranks; the export routes plain "
                  "top-k, as mok does on one rank");
  if (c.model.z_loss_coef > 0)
    out.push_back("model.z_loss_coef (router z-loss) is a training loss with no Mixtral config key");
  out.push_back("dispatcher, parallel, precision and train settings describe how the model was trained, not what "
                "it computes; config.json carries none of them (mok_config.yaml has them all)");
  return out;
}

}  // namespace mok
