#pragma once
// SavedLinearInput: what a linear layer Y = X·W keeps of its input X for backward.
//
// Backward needs X only for the weight gradient dW = Xᵀ·dY; the input gradient dX = dY·Wᵀ
// does not. So a linear layer hands X to one of these at forward and asks it for dW at
// backward. The exact policy keeps X; compact policies (core/kittens/) keep X ≈ P·Q or a
// low-bit copy and compute dW from that, never building X̂. dX stays exact either way.
//
// Shapes: X (n, d_in) with n = tokens; dY (n, d_out); dW (d_in, d_out), row-major.

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor/tensor.h"

MOK_NN_BEGIN

class SavedLinearInput {
 public:
  virtual ~SavedLinearInput() = default;
  // Keep (a compact copy of) X for backward. `tag` says which layer and tensor kind the
  // held bytes are counted under (MemCategory::saved_activations).
  virtual void save(const Tensor& x, const MemTag& tag) = 0;
  // The same for an X the caller no longer needs: a policy that keeps X as it is takes it
  // over instead of copying it. Default: save(x, tag).
  virtual void save_owned(Tensor&& x, const MemTag& tag) { save(x, tag); }
  // dW += scale · X̃ᵀ·dY, where X̃ is what was kept. Frees what save() kept.
  virtual void accumulate_weight_grad(const Tensor& dy, Tensor& dw, real scale) = 0;
  // Bytes held now (0 after accumulate_weight_grad or release).
  virtual int64_t held_bytes() const = 0;
  // Frees what save() kept, for a caller that used restore() instead of
  // accumulate_weight_grad. Default: nothing kept to free.
  virtual void release() {}
  // For policies that keep the whole X (exact, low-bit): X̃ as a dense tensor, for layers
  // whose backward needs X itself. Compact low-rank policies return an empty tensor.
  virtual Tensor restore() const { return {}; }
  // Measured relative reconstruction error ‖X − X̃‖/‖X‖ of the last save (0 when exact);
  // negative when the policy does not measure it.
  virtual double last_relative_error() const { return 0.0; }
  // The same measurement before it is read: (2) f64 [Σ (X − X̃)², Σ X²] on the save's device,
  // so that a caller can collect it without waiting for the device (a GPU save); empty when
  // the policy has no such terms (then last_relative_error() is already on the host).
  virtual Tensor error_terms() const { return {}; }
  virtual std::string describe() const = 0;  // e.g. "exact", "sketch r=16"
};

// ‖X − X̃‖/‖X‖ from error_terms' two sums (0 for an all-zero X).
inline double relative_error_of(double err_sq, double x_sq) { return x_sq > 0.0 ? std::sqrt(err_sq / x_sq) : 0.0; }

// Keeps X as it is. The reference every compact policy is checked against.
std::unique_ptr<SavedLinearInput> make_exact_saved_linear_input();

MOK_NN_END
