#include "core/config/tensor_kinds.h"

#include <algorithm>
#include <set>

namespace mok {
namespace {

// Optimal-string-alignment distance (a transposition counts as one edit).
int distance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

}  // namespace

const std::vector<std::string>& kitten_tensor_kinds() {
  static const std::vector<std::string> kinds = {
      // Linear-layer inputs (SavedLinearInput through the policy).
      "attn.qkv.input", "attn.out.input", "mlp.up.input", "mlp.down.input", "moe.router.input",
      "moe.expert.up.input", "moe.expert.down.input", "moe.shared.up.input", "moe.shared.down.input",
      "head.input",
      // Elementwise tensors (SavedTensorSlot): norm inputs, q/k/v after RoPE, SwiGLU pre-activations.
      "attn_norm.input", "ffn_norm.input", "final_norm.input", "attn.qkv", "mlp.act.input",
      "moe.expert.act.input", "moe.shared.act.input",
  };
  return kinds;
}

bool is_kitten_tensor_kind_prefix(std::string_view prefix) {
  for (const std::string& k : kitten_tensor_kinds())
    if (std::string_view(k).substr(0, prefix.size()) == prefix) return true;
  return false;
}

std::string suggest_kitten_tensor_kind(std::string_view name) {
  // Candidates: every kind and every prefix of one that ends before a '.'.
  std::set<std::string> candidates;
  for (const std::string& k : kitten_tensor_kinds()) {
    candidates.insert(k);
    for (size_t dot = k.find('.'); dot != std::string::npos; dot = k.find('.', dot + 1)) candidates.insert(k.substr(0, dot));
  }
  const int limit = std::max<int>(2, static_cast<int>(name.size()) / 4);
  std::string best;
  int best_d = limit + 1;
  for (const std::string& c : candidates) {
    const int d = distance(name, c);
    if (d < best_d || (d == best_d && c.size() < best.size())) best_d = d, best = c;
  }
  return best;
}

}  // namespace mok
