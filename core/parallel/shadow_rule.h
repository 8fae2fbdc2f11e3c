#pragma once
// ShadowRule: MokCostModel's ship-or-shadow choice for one expert as plain data, so that a GPU
// (Ops::shadow_decisions) makes it bit for bit as the host does: the same products and
// division in the same order, in double (no add, so no fused multiply-add can change them).
//   shadow ⇔ rows > 0 and (always, or automatic and
//            shadow_seconds < ship_passes · rows · d · row_bytes / bytes_per_second)
// with ship_passes = passes · 2 (core/parallel/mok_cost_model.h has the model).

#if defined(__CUDACC__)
#define MOK_SHADOW_RULE_HD __host__ __device__
#else
#define MOK_SHADOW_RULE_HD
#endif

namespace mok {

struct ShadowRule {
  int mode = 0;                 // static_cast<int>(ShadowMode): 0 automatic, 1 never, 2 always
  double shadow_seconds = 0.0;  // the shadow side's cost (independent of rows)
  double ship_passes = 0.0;     // passes · 2: out and back, per pass
  double d = 0.0;               // values per row
  double row_bytes = 0.0;       // bytes per row value
  double bytes_per_second = 0.0;
};

MOK_SHADOW_RULE_HD inline bool shadow_wins(const ShadowRule& r, double rows) {
  if (!(rows > 0.0)) return false;
  if (r.mode == 1) return false;
  if (r.mode == 2) return true;
  return r.shadow_seconds < r.ship_passes * rows * r.d * r.row_bytes / r.bytes_per_second;  // ties → ship
}

}  // namespace mok
