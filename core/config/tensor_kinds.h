#pragma once
// The saved-tensor kinds whose keeping the kitten policy decides, so kittens.kinds keys can be
// checked without building a model. Mirrors what the model asks the policy for (see
// core/model/saved_input_policy.h and the SavedTensorSlot users in core/model/); a kinds key
// is fine when it is a prefix of one of these (the policy matches by prefix, longest wins),
// including "" (every linear input).

#include <string>
#include <string_view>
#include <vector>

namespace mok {

// Full kind names, e.g. "attn.qkv.input", "moe.expert.act.input", "final_norm.input".
const std::vector<std::string>& kitten_tensor_kinds();

// Whether `prefix` is a prefix of at least one kind in kitten_tensor_kinds().
bool is_kitten_tensor_kind_prefix(std::string_view prefix);

// The closest meaningful prefix (a whole kind or one ending at a '.') to an unknown name, or
// "" when nothing is close.
std::string suggest_kitten_tensor_kind(std::string_view name);

}  // namespace mok
