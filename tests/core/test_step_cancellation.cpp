// An abandoned step leaves nothing behind: a TrainStep cancelled after its first
// micro-batch (forward and backward already done, gradients half accumulated) throws
// StepCancelled with the weights, the AdamW moments and its step count bitwise as they
// were, and the same step run afterwards gives bitwise what a model that never saw the
// abandoned step gives. Validation is cancelled between batches the same way.
#include <QtTest>

#include <atomic>
#include <cstring>
#include <filesystem>

#include "core/model/language_model.h"
#include "core/tensor/memory_tracker.h"
#include "core/train/adamw.h"
#include "core/train/evaluation.h"
#include "core/train/rank_model.h"
#include "core/train/step_cancellation.h"
#include "core/train/train_step.h"
#include "core/train/training_data.h"
#include "support/tiny_experiment.h"

namespace fs = std::filesystem;

namespace {

bool same_bits(const mok::Tensor& a, const mok::Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), static_cast<size_t>(a.bytes())) == 0;
}

// Copies of every weight and both moments, to compare bits later.
struct Snapshot {
  std::vector<mok::Tensor> values, m, v;
  explicit Snapshot(const mok::RankModel& rm) {
    for (size_t i = 0; i < rm.params.size(); ++i) {
      values.push_back(rm.params[i]->value.clone());
      m.push_back(rm.adam->first_moments()[i].clone());
      v.push_back(rm.adam->second_moments()[i].clone());
    }
  }
  bool equals(const mok::RankModel& rm) const {
    for (size_t i = 0; i < rm.params.size(); ++i)
      if (!same_bits(values[i], rm.params[i]->value) || !same_bits(m[i], rm.adam->first_moments()[i]) ||
          !same_bits(v[i], rm.adam->second_moments()[i]))
        return false;
    return true;
  }
};

}  // namespace

class TestStepCancellation : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  mok::ExperimentConfig cfg_;
  mok::MemoryTracker tracker_;

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    const std::string corpus = (tmp_.path() + "/corpus").toStdString();
    const std::string missing = mok::test::copy_brown_sample(corpus);
    QVERIFY2(missing.empty(), missing.c_str());
    cfg_ = mok::test::tiny_experiment(corpus, 4);
    cfg_.train.batch = 4;
    cfg_.train.grad_accum = 2;
    cfg_.train.warmup_steps = 1;
    cfg_.train.eval_batches = 2;
  }

  void abandonedStepKeepsNothing() {
    mok::ScopedMemoryTracker track(tracker_);
    const mok::TrainingData data = mok::load_training_data(cfg_, "", [](const std::string&) {});
    mok::RankContext rc;
    const int vocab = data.tokenizer->vocab_size();
    mok::RankModel model = mok::build_rank_model(cfg_, vocab, rc, [](const std::string&) {});
    mok::TrainStep step(cfg_, data.tokens, model, rc);
    step.run(0);  // one whole step first, so the moments are not zero
    const Snapshot before(model);

    std::atomic<bool> stop{true};
    const mok::StepCancellation cancel(&stop);
    QVERIFY_THROWS_EXCEPTION(mok::StepCancelled, step.run(1, cancel));
    QVERIFY(before.equals(model));
    QCOMPARE(model.adam->step_count(), int64_t(1));

    // The step again, to the end: bitwise what a model without the abandoned attempt gets.
    const mok::TrainStepResult after = step.run(1);
    mok::RankModel fresh = mok::build_rank_model(cfg_, vocab, rc, [](const std::string&) {});
    mok::TrainStep fresh_step(cfg_, data.tokens, fresh, rc);
    fresh_step.run(0);
    const mok::TrainStepResult clean = fresh_step.run(1);
    QVERIFY(std::memcmp(&after.loss, &clean.loss, sizeof(double)) == 0);
    QVERIFY(std::memcmp(&after.grad_norm, &clean.grad_norm, sizeof(double)) == 0);
    QVERIFY(Snapshot(fresh).equals(model));
    QVERIFY(!before.equals(model));  // the comparison can fail: the step changed the weights

    // Validation stops between its batches.
    QVERIFY_THROWS_EXCEPTION(mok::StepCancelled, mok::evaluate_validation(cfg_, data.tokens, *model.model, rc, cancel));
    stop = false;
    const mok::ValidationResult v = mok::evaluate_validation(cfg_, data.tokens, *model.model, rc, cancel);
    QVERIFY(v.loss > 0);
  }
};

QTEST_GUILESS_MAIN(TestStepCancellation)
#include "test_step_cancellation.moc"
