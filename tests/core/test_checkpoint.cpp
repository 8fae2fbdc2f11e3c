// Checkpoint folders: weights, AdamW state and trainer state round-trip exactly; `latest`
// resolves to the newest; a write that fails midway leaves the previous checkpoint intact
// and no partial folder behind; a mismatched model is refused with a clear message.
#include <QtTest>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/train/adamw.h"
#include "core/train/checkpoint.h"
#include "core/util/counter_rng.h"

namespace fs = std::filesystem;
using mok::MemCategory;
using mok::MemTag;
using mok::Parameter;
using mok::Tensor;

namespace {

struct TinyModel {
  Parameter a, b;
  explicit TinyModel(uint64_t seed, int64_t rows = 3) {
    a.name = "layers.0.w";
    a.value = Tensor({rows, 4}, MemTag{MemCategory::parameters, -1, ""});
    a.grad = Tensor({rows, 4}, MemTag{MemCategory::gradients, -1, ""});
    b.name = "norm.scale";
    b.value = Tensor({4}, MemTag{MemCategory::parameters, -1, ""});
    b.grad = Tensor({4}, MemTag{MemCategory::gradients, -1, ""});
    b.weight_decay = false;
    for (int64_t i = 0; i < a.value.numel(); ++i) {
      a.value[i] = static_cast<float>(mok::counter_normal(seed, 0, i));
      a.grad[i] = static_cast<float>(mok::counter_normal(seed, 1, i));
    }
    for (int64_t i = 0; i < 4; ++i) {
      b.value[i] = 1.0f;
      b.grad[i] = static_cast<float>(mok::counter_normal(seed, 2, i));
    }
  }
  std::vector<Parameter*> params() { return {&a, &b}; }
};

bool same_bits(const Tensor& x, const Tensor& y) {
  return x.shape() == y.shape() && std::memcmp(x.data(), y.data(), x.bytes()) == 0;
}

std::vector<std::string> hidden_entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind('.', 0) == 0) out.push_back(e.path().filename().string());
  return out;
}

}  // namespace

class TestCheckpoint : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;

 private slots:
  void roundTripIsExact() {
    TinyModel m(1);
    mok::AdamW adam(m.params(), {});
    adam.step(1e-2);
    adam.step(1e-2);
    mok::TrainerState st;
    st.step = 2;
    st.tokens_seen = 4096;
    st.total_steps = 20;
    st.run_id = 17;
    st.run_name = "tiny \"run\"";
    st.seed = 18446744073709551557ull;  // needs all 64 bits
    st.wall_s = 1.25;
    st.counters["data.step"] = 2;
    const std::string run = (tmp_.path() + "/run1").toStdString();
    const std::string dir = run + "/" + mok::checkpoint_folder_name(2);
    QCOMPARE(mok::checkpoint_folder_name(2), std::string("step_000002"));
    mok::save_checkpoint(dir, m.params(), &adam, st, "name: tiny\n", [](const std::string& d) {
      std::ofstream(d + "/tokenizer.txt") << "byte\n";
    });
    QVERIFY(fs::exists(dir + "/model.safetensors"));
    QVERIFY(fs::exists(dir + "/tokenizer.txt"));
    QVERIFY(hidden_entries(run).empty());

    TinyModel fresh(99);
    mok::AdamW adam2(fresh.params(), {});
    mok::load_model_weights(dir, fresh.params());
    mok::load_optimizer_state(dir, adam2);
    QVERIFY(same_bits(fresh.a.value, m.a.value));
    QVERIFY(same_bits(fresh.b.value, m.b.value));
    QVERIFY(same_bits(adam2.first_moments()[0], adam.first_moments()[0]));
    QVERIFY(same_bits(adam2.second_moments()[1], adam.second_moments()[1]));
    QCOMPARE(adam2.step_count(), int64_t(2));
    const mok::TrainerState back = mok::read_trainer_state(dir);
    QCOMPARE(back.step, st.step);
    QCOMPARE(back.tokens_seen, st.tokens_seen);
    QCOMPARE(back.total_steps, st.total_steps);
    QCOMPARE(back.run_id, st.run_id);
    QCOMPARE(back.run_name, st.run_name);
    QCOMPARE(back.seed, st.seed);
    QCOMPARE(back.wall_s, st.wall_s);
    QCOMPARE(back.counters, st.counters);
    QCOMPARE(mok::read_checkpoint_config(dir), std::string("name: tiny\n"));
    // The run folder resolves to its latest checkpoint; the checkpoint to itself.
    QCOMPARE(fs::path(mok::resolve_checkpoint_dir(run)), fs::path(dir));
    QCOMPARE(mok::resolve_checkpoint_dir(dir), dir);
  }

  void latestFollowsTheNewest() {
    TinyModel m(2);
    const std::string run = (tmp_.path() + "/run2").toStdString();
    mok::TrainerState st;
    for (int step : {5, 10}) {
      st.step = step;
      mok::save_checkpoint(run + "/" + mok::checkpoint_folder_name(step), m.params(), nullptr, st, "");
    }
    QCOMPARE(mok::read_trainer_state(mok::resolve_checkpoint_dir(run)).step, int64_t(10));
    QVERIFY(fs::exists(run + "/step_000005/trainer_state.json"));
    QVERIFY(!fs::exists(run + "/step_000010/optimizer.safetensors"));  // weights only
  }

  void failedWriteLeavesPreviousIntact() {
    TinyModel m(3);
    const std::string run = (tmp_.path() + "/run3").toStdString();
    const std::string dir = run + "/step_000004";
    mok::TrainerState st;
    st.step = 4;
    mok::save_checkpoint(dir, m.params(), nullptr, st, "first\n");
    // A second save of the same folder dies midway (after the weights were written).
    m.a.value[0] += 1.0f;
    st.step = 999;
    QVERIFY_THROWS_EXCEPTION(mok::CheckpointError,
                             mok::save_checkpoint(dir, m.params(), nullptr, st, "second\n",
                                                  [](const std::string&) {
                                                    throw std::runtime_error("disk full");
                                                  }));
    QCOMPARE(mok::read_trainer_state(dir).step, int64_t(4));
    QCOMPARE(mok::read_checkpoint_config(dir), std::string("first\n"));
    QVERIFY(hidden_entries(run).empty());  // the partial temp folder was removed
    // A temp folder left by a killed process does not disturb resolving or saving.
    fs::create_directories(run + "/.step_000008.tmp-12345");
    std::ofstream(run + "/.step_000008.tmp-12345/model.safetensors") << "partial";
    QCOMPARE(mok::read_trainer_state(mok::resolve_checkpoint_dir(run)).step, int64_t(4));
    // A successful overwrite replaces it completely.
    mok::save_checkpoint(dir, m.params(), nullptr, st, "second\n");
    QCOMPARE(mok::read_trainer_state(dir).step, int64_t(999));
    TinyModel back(7);
    mok::load_model_weights(dir, back.params());
    QVERIFY(same_bits(back.a.value, m.a.value));
  }

  void mismatchedModelIsRefused() {
    TinyModel m(4);
    const std::string dir = (tmp_.path() + "/run4/step_000001").toStdString();
    mok::save_checkpoint(dir, m.params(), nullptr, {}, "");
    TinyModel bigger(4, 5);
    try {
      mok::load_model_weights(dir, bigger.params());
      QFAIL("expected an error");
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      QVERIFY2(msg.find("model.safetensors") != std::string::npos, msg.c_str());
      QVERIFY2(msg.find("layers.0.w") != std::string::npos, msg.c_str());
    }
    QVERIFY_THROWS_EXCEPTION(mok::CheckpointError,
                             mok::resolve_checkpoint_dir((tmp_.path() + "/nothing").toStdString()));
    fs::create_directories((tmp_.path() + "/empty").toStdString());
    QVERIFY_THROWS_EXCEPTION(mok::CheckpointError,
                             mok::resolve_checkpoint_dir((tmp_.path() + "/empty").toStdString()));
  }
};

QTEST_GUILESS_MAIN(TestCheckpoint)
#include "test_checkpoint.moc"
