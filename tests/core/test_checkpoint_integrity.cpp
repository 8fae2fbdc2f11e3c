// Checkpoint integrity: every file of a checkpoint is listed in its trainer state with its
// size and CRC-32C, and a flipped byte in the weights, the optimizer state or the tokenizer
// is refused on load with a message naming the file; edited trainer states (negative step,
// a step that disagrees with its data counter, an unknown format) are refused; temporary
// folders of dead processes are removed (or, for a folder moved aside, restored) while
// those of live processes are left alone; a run folder resolves to its newest complete
// checkpoint even when `latest` lags behind.
#include <QtTest>

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/train/adamw.h"
#include "core/train/checkpoint.h"
#include "core/train/file_checksum.h"
#include "core/util/counter_rng.h"
#include "support/file_contents.h"

namespace fs = std::filesystem;
using mok::test::read_all;
using mok::MemCategory;
using mok::MemTag;
using mok::Parameter;
using mok::Tensor;

namespace {

struct TwoParams {
  Parameter a, b;
  explicit TwoParams(uint64_t seed) {
    a.name = "layers.0.w";
    a.value = Tensor({8, 4}, MemTag{MemCategory::parameters, -1, ""});
    a.grad = Tensor({8, 4}, MemTag{MemCategory::gradients, -1, ""});
    b.name = "norm.scale";
    b.value = Tensor({4}, MemTag{MemCategory::parameters, -1, ""});
    b.grad = Tensor({4}, MemTag{MemCategory::gradients, -1, ""});
    for (int64_t i = 0; i < a.value.numel(); ++i) {
      a.value[i] = static_cast<float>(mok::counter_normal(seed, 0, i));
      a.grad[i] = static_cast<float>(mok::counter_normal(seed, 1, i));
    }
    for (int64_t i = 0; i < 4; ++i) b.grad[i] = static_cast<float>(mok::counter_normal(seed, 2, i));
  }
  std::vector<Parameter*> params() { return {&a, &b}; }
};

void write_all(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

// Flips one bit of the byte at `offset` from the end of the file.
void flip_byte(const fs::path& p, size_t offset_from_end) {
  std::string bytes = read_all(p);
  bytes[bytes.size() - 1 - offset_from_end] ^= 0x10;
  write_all(p, bytes);
}

// A pid no process has: a child that has already been reaped.
long dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

}  // namespace

class TestCheckpointIntegrity : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;

  // A checkpoint with weights, optimizer state, config and a tokenizer file at step 3.
  std::string save(const std::string& run, int64_t step = 3) {
    TwoParams m(5);
    mok::AdamW adam(m.params(), {});
    for (int64_t i = 0; i < step; ++i) adam.step(1e-2);
    mok::TrainerState st;
    st.step = step;
    st.total_steps = 10;
    st.tokens_seen = step * 64;
    st.counters["data.next_step"] = step;
    const std::string dir = run + "/" + mok::checkpoint_folder_name(step);
    mok::save_checkpoint(dir, m.params(), &adam, st, "name: tiny\n", [](const std::string& d) {
      std::ofstream(d + "/tokenizer.txt") << "byte\n";
    });
    return dir;
  }

 private slots:
  void crc32cMatchesTheStandard() {
    // The CRC-32C check value (RFC 3720, iSCSI): "123456789" → e3069283.
    QCOMPARE(mok::crc32c("123456789", 9), 0xe3069283u);
    QCOMPARE(mok::crc32c("", 0), 0u);
    // Continuing over pieces equals one pass (the 8-byte path and the tail agree).
    const std::string text = "The jury further said in term-end presentments that the City";
    const uint32_t whole = mok::crc32c(text.data(), text.size());
    QCOMPARE(mok::crc32c(text.data() + 13, text.size() - 13, mok::crc32c(text.data(), 13)), whole);
  }

  void everyFileIsListedWithItsChecksum() {
    const std::string dir = save((tmp_.path() + "/listed").toStdString());
    const mok::TrainerState st = mok::read_trainer_state(dir);
    QCOMPARE(st.files.size(), size_t(4));
    for (const char* f : {"model.safetensors", "optimizer.safetensors", "config.yaml", "tokenizer.txt"}) {
      QVERIFY2(st.files.count(f), f);
      QCOMPARE(st.files.at(f), mok::file_digest(dir + "/" + f));
    }
    mok::verify_checkpoint(dir);  // an intact checkpoint passes
  }

  void flippedBytesAreRefused() {
    for (const char* file : {"model.safetensors", "optimizer.safetensors", "tokenizer.txt"}) {
      const std::string dir = save((tmp_.path() + "/flip-" + file).toStdString());
      flip_byte(fs::path(dir) / file, 2);
      TwoParams m(9);
      mok::AdamW adam(m.params(), {});
      const std::string whole = error_of([&] { mok::verify_checkpoint(dir); });
      QVERIFY2(whole.find(file) != std::string::npos && whole.find("damaged") != std::string::npos, whole.c_str());
      const std::string one = error_of([&] { mok::verify_checkpoint_file(dir, file); });
      QVERIFY2(one.find("damaged") != std::string::npos, one.c_str());
      if (std::string(file) == "model.safetensors") {
        const std::string load = error_of([&] { mok::load_model_weights(dir, m.params()); });
        QVERIFY2(load.find("damaged") != std::string::npos, load.c_str());
      }
      if (std::string(file) == "optimizer.safetensors") {
        mok::load_model_weights(dir, m.params());  // the weights themselves are fine
        const std::string load = error_of([&] { mok::load_optimizer_state(dir, adam); });
        QVERIFY2(load.find("damaged") != std::string::npos, load.c_str());
      }
    }
    // A missing listed file is refused too.
    const std::string dir = save((tmp_.path() + "/missing").toStdString());
    fs::remove(fs::path(dir) / "tokenizer.txt");
    const std::string gone = error_of([&] { mok::verify_checkpoint(dir); });
    QVERIFY2(gone.find("missing") != std::string::npos, gone.c_str());
  }

  void editedTrainerStatesAreRefused() {
    const std::string dir = save((tmp_.path() + "/edited").toStdString());
    const fs::path state = fs::path(dir) / "trainer_state.json";
    const std::string good = read_all(state);
    auto with = [&](const std::string& from, const std::string& to) {
      std::string t = good;
      const size_t at = t.find(from);
      if (at == std::string::npos) qFatal("'%s' not in the trainer state", from.c_str());
      t.replace(at, from.size(), to);
      write_all(state, t);
      return error_of([&] { mok::read_trainer_state(dir); });
    };
    QVERIFY(with("\"step\":3", "\"step\":-5").find("negative") != std::string::npos);
    QVERIFY(with("\"step\":3", "\"step\":999999").find("data.next_step") != std::string::npos);
    QVERIFY(with("mok-checkpoint-2", "mok-checkpoint-9").find("unknown format") != std::string::npos);
    QVERIFY(with("\"crc32c\"", "\"crc\"").find("bad trainer state") != std::string::npos);
    // Found by tests/fuzz/fuzz_trainer_state: std::stoull read "-5" as 2^64 - 5 (another
    // seed, other data), and a negative file size passed.
    const size_t seed_at = good.find("\"seed\":\"");
    QVERIFY(seed_at != std::string::npos);
    const std::string seed_field = good.substr(seed_at, good.find('"', seed_at + 8) + 1 - seed_at);
    QVERIFY(with(seed_field, "\"seed\":\"-5\"").find("seed '-5' is not a non-negative") != std::string::npos);
    QVERIFY(with(seed_field, "\"seed\":\" 12x\"").find("seed ' 12x'") != std::string::npos);
    QVERIFY(with("\"bytes\":", "\"bytes\":-").find("a file of -") != std::string::npos);
    QVERIFY(with("\"wall_s\":", "\"wall_s\":1e9999,\"x\":").find("number overflow parsing '1e9999'") != std::string::npos);
    write_all(state, good);
    QCOMPARE(mok::read_trainer_state(dir).step, int64_t(3));
  }

  void staleTemporariesAreCleanedLiveOnesKept() {
    const std::string run = (tmp_.path() + "/stale").toStdString();
    save(run, 3);
    const long dead = dead_pid();
    const std::string d = std::to_string(dead), me = std::to_string(::getpid());
    // A save of a dead process: partial folder, partial `latest`, a folder being removed.
    fs::create_directories(run + "/.step_000004.tmp-" + d);
    write_all(run + "/.step_000004.tmp-" + d + "/model.safetensors", "partial");
    write_all(run + "/.latest.tmp-" + d, "step_000004\n");
    fs::create_directories(run + "/.step_000001.del-" + d);
    // A replacing save of a dead process that had moved step 2 aside: it comes back.
    fs::create_directories(run + "/.step_000002.old-" + d);
    write_all(run + "/.step_000002.old-" + d + "/trainer_state.json", "{}");
    // This (live) process's temporary folder stays.
    fs::create_directories(run + "/.step_000009.tmp-" + me);
    const std::vector<std::string> done = mok::clean_stale_checkpoint_temps(run);
    QCOMPARE(done.size(), size_t(4));
    QVERIFY(!fs::exists(run + "/.step_000004.tmp-" + d));
    QVERIFY(!fs::exists(run + "/.latest.tmp-" + d));
    QVERIFY(!fs::exists(run + "/.step_000001.del-" + d));
    QVERIFY(fs::exists(run + "/step_000002/trainer_state.json"));
    QVERIFY(fs::exists(run + "/.step_000009.tmp-" + me));
    QVERIFY(fs::exists(run + "/step_000003/model.safetensors"));
    fs::remove_all(run + "/.step_000009.tmp-" + me);
  }

  void runFolderResolvesToItsNewestCheckpoint() {
    const std::string run = (tmp_.path() + "/newest").toStdString();
    save(run, 3);
    const std::string four = save(run, 4);
    // A save that died after its folder appeared and before `latest` was rewritten.
    write_all(run + "/latest", "step_000003\n");
    QCOMPARE(fs::path(mok::resolve_checkpoint_dir(run)), fs::path(four));
    QCOMPARE(mok::list_checkpoints(run).size(), size_t(2));
    // Removing a checkpoint leaves no partial folder behind.
    mok::remove_checkpoint(four);
    QVERIFY(!fs::exists(four));
    for (const auto& e : fs::directory_iterator(run)) QVERIFY(e.path().filename().string()[0] != '.');
    QCOMPARE(mok::read_trainer_state(mok::resolve_checkpoint_dir(run)).step, int64_t(3));
  }
};

QTEST_GUILESS_MAIN(TestCheckpointIntegrity)
#include "test_checkpoint_integrity.moc"
