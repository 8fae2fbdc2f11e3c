// Kittens in the model: with every tensor exact through the kitten policy the results are
// bitwise those of the reference core, and at the kitten defaults the saved-activation bytes
// of the quickstart model are at most 25% of the exact run's (measured by the tracker).
#include <QtTest>

#include <cstring>
#include <vector>

#include "core/model/language_model.h"
#include "core/util/counter_rng.h"

using namespace mok;

namespace {

ModelOptions quickstart(const char* mode) {
  ModelOptions o;  // ModelConfig defaults are the quickstart shape
  o.kittens.mode = mode;
  o.vocab_size = 256;
  o.max_seq_len = 128;
  o.seed = 1234;
  o.train_steps = 2000;
  return o;
}

std::vector<int32_t> tokens(int n, uint64_t stream) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = static_cast<int32_t>(counter_bits(3, stream, i) % 256);
  return t;
}

struct Run {
  double loss = 0;
  std::vector<std::vector<real>> grads;
  int64_t peak_saved = 0;
  std::map<std::pair<int, std::string>, MemoryTracker::KindBytes> by_kind;
};

// `tracker` must outlive what the model keeps (it stays kept without a backward).
Run run(LanguageModel& m, MemoryTracker& tracker, int batch, int seq, int64_t step, bool with_backward = true) {
  ScopedMemoryTracker scope(tracker);
  tracker.reset_peaks();
  const auto x = tokens(batch * seq, 1 + step), y = tokens(batch * seq, 100 + step);
  m.set_step(step);
  m.zero_grad();
  Run r;
  r.loss = m.forward(x.data(), y.data(), batch, seq).loss;
  r.by_kind = tracker.saved_by_layer_kind();
  r.peak_saved = tracker.peak_bytes(MemCategory::saved_activations);
  if (with_backward) {
    m.backward();
    for (Parameter* p : m.parameters()) r.grads.emplace_back(p->grad.data(), p->grad.data() + p->grad.numel());
  }
  return r;
}

}  // namespace

class TestKittenModel : public QObject {
  Q_OBJECT
 private slots:
  void everyTensorExactIsBitwiseTheReference() {
    ModelOptions small = quickstart("exact");
    small.model.layers = 2;
    small.model.d_model = 64;
    small.model.expert_hidden = 64;
    small.max_seq_len = 32;
    MemoryTracker tracker;
    LanguageModel reference(small);
    ModelOptions all_exact = small;
    all_exact.kittens.mode = "custom";       // the kitten policy is installed …
    all_exact.kittens.kinds[""] = {"exact", -1, -1};  // … and keeps every linear input exactly
    all_exact.kittens.elementwise = "exact";           // and every elementwise tensor
    LanguageModel kitten(all_exact);
    QVERIFY(kitten.kitten_metrics().size() > 0);
    for (int64_t step = 0; step < 2; ++step) {
      const Run a = run(reference, tracker, 4, 32, step), b = run(kitten, tracker, 4, 32, step);
      QCOMPARE(std::memcmp(&a.loss, &b.loss, sizeof(double)), 0);
      QCOMPARE(a.grads.size(), b.grads.size());
      for (size_t i = 0; i < a.grads.size(); ++i)
        QVERIFY(std::memcmp(a.grads[i].data(), b.grads[i].data(), a.grads[i].size() * sizeof(real)) == 0);
      QCOMPARE(a.peak_saved, b.peak_saved);
    }
  }

  void kittenDefaultsKeepAQuarterOfTheBytes() {
    MemoryTracker exact_tracker, kitten_tracker;  // declared first: they outlive the models
    LanguageModel exact(quickstart("exact"));
    LanguageModel kitten(quickstart("kitten"));
    const Run a = run(exact, exact_tracker, 16, 128, 0, false);
    const Run b = run(kitten, kitten_tracker, 16, 128, 0, false);
    const double ratio = static_cast<double>(b.peak_saved) / static_cast<double>(a.peak_saved);
    qInfo("quickstart saved activations: exact %lld B, kitten %lld B, ratio %.4f",
          static_cast<long long>(a.peak_saved), static_cast<long long>(b.peak_saved), ratio);
    std::map<std::string, std::pair<int64_t, int64_t>> kinds;  // kind → (exact, kitten) summed over layers
    for (const auto& [k, v] : a.by_kind) kinds[k.second].first += v.peak;
    for (const auto& [k, v] : b.by_kind) kinds[k.second].second += v.peak;
    for (const auto& [k, v] : kinds)
      qInfo("  %-24s exact %10lld  kitten %10lld", k.c_str(), static_cast<long long>(v.first),
            static_cast<long long>(v.second));
    QVERIFY2(ratio <= 0.25, qPrintable(QString("ratio %1").arg(ratio)));
    // Still a sane model: the loss at initialisation is about ln(256).
    QVERIFY(std::abs(b.loss - a.loss) < 0.05);
  }
};

QTEST_GUILESS_MAIN(TestKittenModel)
#include "test_kitten_model.moc"
