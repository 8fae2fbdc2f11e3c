// Compact saved linear inputs (double precision): the sketch estimator of dW is unbiased and
// its error falls like 1/√N over N seeds; randomized SVD and the subspace policy are exact
// once the rank reaches the true rank; low-bit copies stay within the quantization bound;
// held bytes follow the formulas and are what the MemoryTracker sees.
#include <QtTest>

#include <cmath>
#include <vector>

#include "core/backend/cholesky_qr.h"
#include "core/backend/gemm.h"
#include "core/backend/qr.h"
#include "core/kittens/gaussian_sketch.h"
#include "core/kittens/kitten_key.h"
#include "core/kittens/lowbit_saved_linear_input.h"
#include "core/kittens/quantized_matrix.h"
#include "core/kittens/rsvd_saved_linear_input.h"
#include "core/kittens/sketch_saved_linear_input.h"
#include "core/kittens/subspace_saved_linear_input.h"
#include "core/util/counter_rng.h"

using namespace mok;

namespace {

const MemTag kTag{MemCategory::saved_activations, 2, "mlp.up.input"};

Tensor random_matrix(int64_t rows, int64_t cols, uint64_t stream, double scale = 1.0) {
  Tensor t({rows, cols});
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = scale * counter_normal(99, stream, i);
  return t;
}

// (rows, cols) matrix of rank k: A (rows, k) · B (k, cols).
Tensor low_rank_matrix(int64_t rows, int64_t cols, int k, uint64_t stream) {
  Tensor a = random_matrix(rows, k, stream), b = random_matrix(k, cols, stream + 1000);
  Tensor x({rows, cols});
  matmul(a.data(), b.data(), x.data(), rows, k, cols);
  return x;
}

Tensor exact_grad(const Tensor& x, const Tensor& dy) {
  Tensor dw({x.dim(1), dy.dim(1)});
  matmul_tn(x.data(), dy.data(), dw.data(), x.dim(1), x.dim(0), dy.dim(1));
  return dw;
}

Tensor policy_grad(SavedLinearInput& s, const Tensor& x, const Tensor& dy, MemTag tag = kTag) {
  s.save(x, tag);
  Tensor dw({x.dim(1), dy.dim(1)});
  s.accumulate_weight_grad(dy, dw, 1.0);
  return dw;
}

double frob_diff(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(s);
}
double frob(const Tensor& a) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a[i] * a[i];
  return std::sqrt(s);
}

// RMS over `groups` disjoint groups of `per_group` seeds of ‖mean sketch dW − exact dW‖.
double sketch_mean_error(const Tensor& x, const Tensor& dy, const Tensor& exact, int per_group, int groups,
                         uint64_t first_seed) {
  double sq = 0.0;
  uint64_t seed = first_seed;
  for (int g = 0; g < groups; ++g) {
    Tensor mean({x.dim(1), dy.dim(1)});
    for (int s = 0; s < per_group; ++s) {
      CompactOptions o;
      o.rank = 4;
      o.seed = seed++;
      o.measure_error = false;
      auto p = make_sketch_saved_linear_input(o);
      p->save(x, kTag);
      p->accumulate_weight_grad(dy, mean, 1.0 / per_group);
    }
    const double e = frob_diff(mean, exact);
    sq += e * e;
  }
  return std::sqrt(sq / groups);
}

}  // namespace

class TestKittenSavedInputs : public QObject {
  Q_OBJECT
 private slots:
  void sketchIsUnbiasedWithInverseSqrtRate() {
    Tensor x = random_matrix(24, 16, 1), dy = random_matrix(24, 6, 2);
    const Tensor exact = exact_grad(x, dy);
    const double e16 = sketch_mean_error(x, dy, exact, 16, 16, 1000);
    const double e256 = sketch_mean_error(x, dy, exact, 256, 16, 500000);
    const double ratio = e16 / e256;
    qInfo("sketch mean-error: N=16 %.4g, N=256 %.4g, ratio %.3f (1/sqrt(N) predicts 4)", e16, e256, ratio);
    QVERIFY2(ratio > 3.4 && ratio < 4.6, qPrintable(QString("ratio %1").arg(ratio)));
    // And the mean really approaches the exact gradient: after 4096 draws it is within a few
    // percent, while one draw is off by far more.
    const double e4096 = sketch_mean_error(x, dy, exact, 4096, 1, 7000000);
    const double e1 = sketch_mean_error(x, dy, exact, 1, 16, 9000000);
    QVERIFY(e4096 < 0.05 * frob(exact));
    QVERIFY(e1 > 10 * e4096);
  }

  void sketchRegeneratesTheSameQInBackward() {
    Tensor x = random_matrix(20, 12, 3), dy = random_matrix(20, 5, 4);
    CompactOptions o;
    o.rank = 3;
    o.seed = 77;
    o.step = 9;
    auto p = make_sketch_saved_linear_input(o);
    const Tensor dw = policy_grad(*p, x, dy);
    // Explicit Qᵀ(Pᵀ dY) with Q drawn from the documented key.
    Tensor q({3, 12}), pm({20, 3}), t({3, 5}), ref({12, 5});
    fill_gaussian(q.data(), 3, 12, 1.0 / 3, kitten_step_seed(77, 9),
                  kitten_draw_stream(kTag.layer, kTag.kind, KittenDraw::sketch));
    matmul_nt(x.data(), q.data(), pm.data(), 20, 12, 3);
    matmul_tn(pm.data(), dy.data(), t.data(), 3, 20, 5);
    matmul_tn(q.data(), t.data(), ref.data(), 12, 3, 5);
    QVERIFY(frob_diff(dw, ref) < 1e-12 * frob(ref));
    // Another step draws another Q.
    o.step = 10;
    auto p2 = make_sketch_saved_linear_input(o);
    QVERIFY(frob_diff(policy_grad(*p2, x, dy), ref) > 1e-3 * frob(ref));
  }

  void rsvdIsExactAtTrueRank() {
    const Tensor x = low_rank_matrix(40, 24, 5, 10), dy = random_matrix(40, 7, 11);
    const Tensor exact = exact_grad(x, dy);
    for (int rank : {5, 8}) {
      for (int iters : {0, 1, 2}) {
        CompactOptions o;
        o.rank = rank;
        o.power_iters = iters;
        auto p = make_rsvd_saved_linear_input(o);
        const Tensor dw = policy_grad(*p, x, dy);
        QVERIFY2(frob_diff(dw, exact) < 1e-10 * frob(exact), qPrintable(QString("rank %1 iters %2").arg(rank).arg(iters)));
        QVERIFY(p->last_relative_error() < 1e-6);
      }
    }
    // Below the true rank it is not exact, and it says so.
    CompactOptions o;
    o.rank = 3;
    auto p = make_rsvd_saved_linear_input(o);
    const Tensor dw = policy_grad(*p, x, dy);
    QVERIFY(frob_diff(dw, exact) > 1e-3 * frob(exact));
    QVERIFY(p->last_relative_error() > 1e-3);
  }

  void powerIterationsApproachTheOptimalTail() {
    // Decaying spectrum: the rank-r error with power iterations is close to the SVD optimum,
    // and no worse than without them.
    const int64_t n = 60, d = 30;
    Tensor x({n, d});
    for (int k = 0; k < 30; ++k) {
      const double sigma = std::pow(0.7, k);
      Tensor u = random_matrix(n, 1, 200 + k), v = random_matrix(1, d, 300 + k);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j) x[i * d + j] += sigma * u[i] * v[j];
    }
    double e0 = 0, e2 = 0;
    for (int iters : {0, 2}) {
      CompactOptions o;
      o.rank = 6;
      o.power_iters = iters;
      auto p = make_rsvd_saved_linear_input(o);
      p->save(x, kTag);
      (iters ? e2 : e0) = p->last_relative_error();
    }
    QVERIFY(e2 <= e0 + 1e-12);
    QVERIFY(e2 < 0.6);  // the rank-6 tail of 0.7^k holds ~14% of the energy: error ≲ 0.4
  }

  void subspaceKeepsItsBasisBetweenRefreshes() {
    const Tensor b = random_matrix(4, 20, 21);  // a 4-dimensional row space
    auto rows_in_space = [&](uint64_t stream) {
      Tensor c = random_matrix(30, 4, stream), x({30, 20});
      matmul(c.data(), b.data(), x.data(), 30, 4, 20);
      return x;
    };
    auto basis = std::make_shared<SubspaceBasis>();
    CompactOptions o;
    o.rank = 4;
    auto run = [&](const Tensor& x, const Tensor& dy, int64_t step) {
      o.step = step;
      auto p = make_subspace_saved_linear_input(basis, o, 10);
      Tensor dw = policy_grad(*p, x, dy);
      return std::make_pair(std::move(dw), p->last_relative_error());
    };
    const Tensor x0 = rows_in_space(22), x1 = rows_in_space(23), dy = random_matrix(30, 3, 24);
    run(x0, dy, 0);
    QCOMPARE(basis->refreshes, int64_t(1));
    // A new X in the same row space, before the next refresh: the old basis is exact for it.
    auto [dw1, e1] = run(x1, dy, 1);
    QCOMPARE(basis->refreshes, int64_t(1));
    QVERIFY(frob_diff(dw1, exact_grad(x1, dy)) < 1e-10 * frob(exact_grad(x1, dy)));
    QVERIFY(e1 < 1e-6);
    // An X outside that space is not, until the refresh at step 10.
    const Tensor x2 = random_matrix(30, 20, 25);
    auto [dw2, e2] = run(x2, dy, 5);
    QVERIFY(e2 > 0.5);
    run(x2, dy, 10);
    QCOMPARE(basis->refreshes, int64_t(2));
  }

  void lowbitWithinQuantizationBound() {
    const Tensor x = random_matrix(17, 33, 31, 3.0);  // odd width: 4-bit codes pack unevenly
    for (int bits : {8, 4}) {
      for (bool stochastic : {false, true}) {
        QuantizedMatrix q;
        QuantizeOptions opt{bits, stochastic, 5, 6};
        q.quantize(x, opt, MemTag{}, false);
        Tensor xr({17, 33});
        q.dequantize(xr);
        const int qmax = bits == 8 ? 127 : 7;
        for (int64_t r = 0; r < 17; ++r) {
          double absmax = 0;
          for (int64_t c = 0; c < 33; ++c) absmax = std::max(absmax, std::fabs(x[r * 33 + c]));
          const double s = q.scale(r);
          QVERIFY(std::fabs(s - absmax / qmax) <= 1e-6 * absmax / qmax);
          const double bound = stochastic ? s : 0.5 * s;
          for (int64_t c = 0; c < 33; ++c)
            QVERIFY(std::fabs(x[r * 33 + c] - xr[r * 33 + c]) <= bound * (1 + 1e-6));
        }
        QCOMPARE(q.held_bytes(), 17 * ((33 * bits + 7) / 8) + 17 * 4);
      }
    }
  }

  void stochasticRoundingIsUnbiased() {
    const Tensor x = random_matrix(8, 16, 41);
    Tensor mean({8, 16}), xr({8, 16});
    const int draws = 2000;
    for (int s = 0; s < draws; ++s) {
      QuantizedMatrix q;
      q.quantize(x, QuantizeOptions{4, true, static_cast<uint64_t>(s), 1}, MemTag{}, false);
      q.dequantize(xr);
      for (int64_t i = 0; i < x.numel(); ++i) mean[i] += xr[i] / draws;
    }
    // Nearest rounding has a fixed bias; the stochastic mean is far closer.
    QuantizedMatrix qn;
    qn.quantize(x, QuantizeOptions{4, false, 0, 0}, MemTag{}, false);
    qn.dequantize(xr);
    QVERIFY(frob_diff(mean, x) < 0.25 * frob_diff(xr, x));
  }

  void lowbitGradientUsesTheRestoredCopy() {
    const Tensor x = random_matrix(12, 10, 51), dy = random_matrix(12, 4, 52);
    CompactOptions o;
    o.bits = 4;
    auto p = make_lowbit_saved_linear_input(o);
    p->save(x, kTag);
    const Tensor xr = p->restore();
    QCOMPARE(xr.shape(), x.shape());
    Tensor dw({10, 4});
    p->accumulate_weight_grad(dy, dw, 1.0);
    QVERIFY(frob_diff(dw, exact_grad(xr, dy)) < 1e-12 * frob(dw));
    QVERIFY(frob_diff(xr, x) > 0);
    QVERIFY(p->last_relative_error() > 0 && p->last_relative_error() < 0.2);
  }

  void heldBytesMatchFormulasAndTracker() {
    const int64_t n = 50, d = 32, r = 8;
    const Tensor x = random_matrix(n, d, 61), dy = random_matrix(n, 5, 62);
    const int64_t word = sizeof(real);
    MemoryTracker tracker;  // outlives everything allocated below
    ScopedMemoryTracker scope(tracker);
    struct Case {
      const char* name;
      std::unique_ptr<SavedLinearInput> p;
      int64_t bytes;
    };
    CompactOptions o;
    o.rank = r;
    CompactOptions o8 = o;
    o8.factor_bits = 8;
    CompactOptions o4 = o;
    o4.bits = 4;
    auto basis = std::make_shared<SubspaceBasis>();
    std::vector<Case> cases;
    cases.push_back({"sketch", make_sketch_saved_linear_input(o), n * r * word});
    cases.push_back({"sketch P8", make_sketch_saved_linear_input(o8), n * r + 4 * n});
    cases.push_back({"rsvd", make_rsvd_saved_linear_input(o), (n * r + r * d) * word});
    cases.push_back({"subspace", make_subspace_saved_linear_input(basis, o, 10), n * r * word});
    cases.push_back({"lowbit8", make_lowbit_saved_linear_input(o), n * d + 4 * n});
    cases.push_back({"lowbit4", make_lowbit_saved_linear_input(o4), n * d / 2 + 4 * n});
    for (auto& c : cases) {
      c.p->save(x, kTag);
      QVERIFY2(c.p->held_bytes() == c.bytes, c.name);
      const auto saved = tracker.saved_by_layer_kind();
      QCOMPARE(saved.at({kTag.layer, kTag.kind}).live, c.bytes);
      Tensor dw({d, 5});
      c.p->accumulate_weight_grad(dy, dw, 1.0);
      QCOMPARE(c.p->held_bytes(), int64_t(0));
      QCOMPARE(tracker.saved_by_layer_kind().at({kTag.layer, kTag.kind}).live, int64_t(0));
    }
    // The subspace basis lives on, counted under its own kind.
    QVERIFY(basis->v);
    QCOMPARE(basis->v->bytes(), d * r * word);
    QCOMPARE(basis->v->tag().kind, kTag.kind + ".basis");
  }

  void householderQrIsOrthonormalEvenWhenRankDeficient() {
    Tensor a = low_rank_matrix(30, 8, 3, 71);  // 8 columns of rank 3
    const Tensor a0 = a.clone();
    orthonormalize_columns(a.data(), 30, 8);
    Tensor g({8, 8});
    matmul_tn(a.data(), a.data(), g.data(), 8, 30, 8);
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j) QVERIFY(std::fabs(g[i * 8 + j] - (i == j ? 1.0 : 0.0)) < 1e-12);
    // range(a0) ⊆ range(Q): Q·Qᵀ·a0 = a0.
    Tensor t({8, 8}), back({30, 8});
    matmul_tn(a.data(), a0.data(), t.data(), 8, 30, 8);
    matmul(a.data(), t.data(), back.data(), 30, 8, 8);
    QVERIFY(frob_diff(back, a0) < 1e-12 * frob(a0));
  }

  // The GPU's orthonormalization (CholeskyQR2, kernels/low_rank.cu) through its host twin:
  // nonzero columns orthonormal, dependent columns zero, the same projector as Householder.
  void choleskyQr2MatchesHouseholderProjector() {
    struct Case { int64_t rows, cols; int rank; };
    for (const Case c : {Case{600, 8, 8}, Case{30, 8, 3}, Case{300, 16, 5}}) {  // 600 rows: three Gram blocks
      Tensor a = low_rank_matrix(c.rows, c.cols, c.rank, 83 + c.rank);
      const Tensor a0 = a.clone();
      Tensor h = a.clone();
      cholesky_qr2(a.data(), c.rows, c.cols);
      orthonormalize_columns(h.data(), c.rows, c.cols);
      Tensor g({c.cols, c.cols});
      matmul_tn(a.data(), a.data(), g.data(), c.cols, c.rows, c.cols);
      int nonzero = 0;
      for (int64_t i = 0; i < c.cols; ++i) {
        const bool zero = g[i * c.cols + i] == 0.0;
        nonzero += !zero;
        for (int64_t j = 0; j < c.cols; ++j) {
          const double want = (i == j && !zero) ? 1.0 : 0.0;
          QVERIFY2(std::fabs(g[i * c.cols + j] - want) < 1e-12, qPrintable(QString("G(%1,%2)").arg(i).arg(j)));
        }
      }
      QCOMPARE(nonzero, c.rank);
      // Q·Qᵀ·a0 = a0 and Q·Qᵀ = H·Hᵀ (applied to a random matrix).
      Tensor t({c.cols, c.cols}), back({c.rows, c.cols});
      matmul_tn(a.data(), a0.data(), t.data(), c.cols, c.rows, c.cols);
      matmul(a.data(), t.data(), back.data(), c.rows, c.cols, c.cols);
      QVERIFY(frob_diff(back, a0) < 1e-12 * frob(a0));
      Tensor z = low_rank_matrix(c.rows, 4, 4, 97);
      Tensor tq({c.cols, 4}), th({c.cols, 4}), pq({c.rows, 4}), ph({c.rows, 4});
      matmul_tn(a.data(), z.data(), tq.data(), c.cols, c.rows, 4);
      matmul(a.data(), tq.data(), pq.data(), c.rows, c.cols, 4);
      if (c.rank == c.cols) {  // Householder completes a rank-deficient basis arbitrarily
        matmul_tn(h.data(), z.data(), th.data(), c.cols, c.rows, 4);
        matmul(h.data(), th.data(), ph.data(), c.rows, c.cols, 4);
        QVERIFY(frob_diff(pq, ph) < 1e-12 * frob(z));
      }
    }
    Tensor zero({20, 4});
    cholesky_qr2(zero.data(), 20, 4);
    QCOMPARE(frob(zero), 0.0);
  }
};

QTEST_GUILESS_MAIN(TestKittenSavedInputs)
#include "test_kitten_saved_inputs.moc"
