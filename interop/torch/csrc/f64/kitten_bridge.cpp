// kitten_bridge.cpp built against the core's double build (mok_nn_f64: real = double), so that the
// modules run in float64 too (gradient checks).
#define MOK_REAL_DOUBLE 1
#include "interop/torch/csrc/kitten_bridge.cpp"
