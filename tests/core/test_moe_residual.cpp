// The fused residual forms of the MoE layer and of a linear layer's input gradient: on the
// CPU they run as the product (or combine) and then the add, so they must give bitwise what
// the separate add gives; a GPU backend may fuse them (kernels/cuda_ops.cpp). Forward with
// the block's residual stream, with and without a shared expert; the gradient of a linear
// layer with another branch's gradient added, weight gradient unchanged; mismatched shapes
// refused.
#include <QtTest>

#include <cstring>
#include <stdexcept>

#include "core/backend/exec_context.h"
#include "core/model/linear.h"
#include "core/model/moe_layer.h"
#include "core/util/counter_rng.h"

using namespace mok;

namespace {

Tensor random_rows(int64_t rows, int64_t cols, uint64_t stream) {
  Tensor t({rows, cols});
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<real>(counter_normal(9, stream, i));
  return t;
}

Tensor plus(const Tensor& a, const Tensor& b) {
  Tensor out(a.shape());
  for (int64_t i = 0; i < a.numel(); ++i) out[i] = a[i] + b[i];
  return out;
}

bool same(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

}  // namespace

class TestMoeResidual : public QObject {
  Q_OBJECT
 private slots:
  void moeForwardWithTheResidualEqualsTheAdd_data() {
    QTest::addColumn<bool>("shared");
    QTest::newRow("routed experts") << false;
    QTest::newRow("with a shared expert") << true;
  }

  void moeForwardWithTheResidualEqualsTheAdd() {
    QFETCH(bool, shared);
    MoeConfig c;
    c.d = 8;
    c.experts = 4;
    c.top_k = 2;
    c.hidden = 12;
    c.shared_expert = shared;
    MoeLayer layer("layers.0.moe", c, 0.3, 0.2, 7, 0);
    const Tensor x = random_rows(37, 8, 1), residual = random_rows(37, 8, 2);
    const Tensor plain = layer.forward(x, false, nullptr);
    const Tensor fused = layer.forward(x, false, nullptr, &residual);
    QVERIFY(!same(plain, fused));  // the residual is there ...
    QVERIFY(same(fused, plus(plain, residual)));  // ... added once, after the experts (and the shared one)
    const Tensor wrong = random_rows(36, 8, 3);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, layer.forward(x, false, nullptr, &wrong));
  }

  void linearInputGradientWithTheResidualEqualsTheAdd() {
    Linear plain_layer("w", 8, 5, 0.3, 11, 0, "x.input"), fused_layer("w", 8, 5, 0.3, 11, 0, "x.input");
    const Tensor x = random_rows(9, 8, 4), dy = random_rows(9, 5, 5), residual = random_rows(9, 8, 6);
    plain_layer.forward(x, true);
    fused_layer.forward(x, true);
    const Tensor plain = plain_layer.backward(dy);
    const Tensor fused = fused_layer.backward(dy, &residual);
    QVERIFY(same(fused, plus(plain, residual)));
    QVERIFY(same(fused_layer.weight().grad, plain_layer.weight().grad));  // dW as without
    const Tensor wrong = random_rows(9, 7, 7);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, fused_layer.input_grad(dy, &wrong));
  }
};

QTEST_GUILESS_MAIN(TestMoeResidual)
#include "test_moe_residual.moc"
