#pragma once
// The scalar type of the numeric core. mok_nn is built with real = float, mok_nn_f64 with
// real = double (for finite-difference gradient checks). Code in the numeric folders sits
// between MOK_NN_BEGIN and MOK_NN_END so that both builds can be linked side by side.

#if defined(MOK_REAL_DOUBLE)
#define MOK_NN_BEGIN namespace mok { inline namespace f64 {
#define MOK_NN_END } }
#else
#define MOK_NN_BEGIN namespace mok { inline namespace f32 {
#define MOK_NN_END } }
#endif

MOK_NN_BEGIN
#if defined(MOK_REAL_DOUBLE)
using real = double;
#else
using real = float;
#endif
MOK_NN_END
