#pragma once
// TrainingData: the token streams a run trains and validates on, and their tokenizer.
// The corpus (data.corpus) is split into train and validation documents (data.val_fraction);
// the tokenizer is built from the train split (data.tokenizer) — or, on resume, read from
// the checkpoint (required there, and checked against its checksum), so a learned
// vocabulary never changes mid-run.

#include <memory>
#include <string>

#include "core/config/experiment_config.h"
#include "core/data/token_dataset.h"
#include "core/data/tokenizer.h"
#include "core/train/train_event.h"

namespace mok {

struct TrainingData {
  std::unique_ptr<Tokenizer> tokenizer;
  TokenDataset tokens;  // train and validation ids
};

// `resume_dir`: the checkpoint folder resumed from ("" for a new run). Throws on a corpus
// or tokenizer problem; reports what it loaded through `event`.
TrainingData load_training_data(const ExperimentConfig& config, const std::string& resume_dir, const TrainEvent& event);

}  // namespace mok
