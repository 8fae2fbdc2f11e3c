#include "core/train/training_data.h"

#include <filesystem>

#include "core/data/corpus.h"
#include "core/data/corpus_split.h"
#include "core/data/tokenizer_factory.h"
#include "core/train/checkpoint.h"

namespace mok {

namespace fs = std::filesystem;

TrainingData load_training_data(const ExperimentConfig& cfg, const std::string& resume_dir, const TrainEvent& event) {
  event("loading corpus " + cfg.data.corpus);
  const Corpus corpus = load_corpus(cfg.data.corpus);
  const CorpusSplit split = split_corpus(corpus, cfg.data.val_fraction);
  TrainingData d;
  if (!resume_dir.empty()) {
    // The ids the weights were trained on: never rebuilt (a BPE vocabulary could differ).
    const fs::path stored = fs::path(resume_dir) / CheckpointFiles::tokenizer;
    if (!fs::exists(stored)) {
      throw CheckpointError(resume_dir + ": no " + CheckpointFiles::tokenizer +
                            " in the checkpoint; a resume needs the tokenizer the run was trained with");
    }
    verify_checkpoint_file(resume_dir, CheckpointFiles::tokenizer);
    d.tokenizer = Tokenizer::load(stored.string());
  } else {
    d.tokenizer = make_tokenizer(cfg.data.tokenizer, cfg.data.vocab_size, split);
  }
  d.tokens = build_token_dataset(split, *d.tokenizer);
  event("data: " + std::to_string(corpus.documents.size()) + " documents, " + std::to_string(d.tokens.train.size()) +
        " train / " + std::to_string(d.tokens.val.size()) + " val tokens, tokenizer " + d.tokenizer->name() + " (" +
        std::to_string(d.tokenizer->vocab_size()) + " ids)");
  return d;
}

}  // namespace mok
