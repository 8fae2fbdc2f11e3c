// mok: the headless command-line front end of the training core (no Qt).
//   mok train CONFIG [--db PATH] [--set key=value]... [--json]
//   mok config validate|print|schema ...
//   mok runs list|show|export-csv|import ...
//   mok generate CHECKPOINT ...
//   mok plan CONFIG [--device-memory SIZE] [--json]
//   mok export CONFIG --slurm --nodes N --gpus-per-node G ...
//   mok export CHECKPOINT --hf DIR ...
//   mok import-hf DIR [--out RUN_DIR] ...
// Each subcommand lives in its own cmd_*.cpp; this file only dispatches.

#include <cstdio>
#include <cstring>
#include <string>

#include "app/cli/commands.h"
#include "core/util/code_version.h"
#if MOK_HAVE_CUDA
#include "kernels/cuda_backend.h"
#endif

namespace {

struct Command {
  const char* name;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand name
  const char* summary;
};

const Command kCommands[] = {
    {"train", mok::cli::cmd_train, "train a model from an experiment config"},
    {"config", mok::cli::cmd_config, "validate, print or document experiment configs"},
    {"runs", mok::cli::cmd_runs, "list, show, export and import runs of a run store"},
    {"generate", mok::cli::cmd_generate, "sample text from a checkpoint"},
    {"plan", mok::cli::cmd_plan, "the memory a config needs per rank, and whether it fits"},
    {"export", mok::cli::cmd_export, "write a Slurm job folder for a config, or a checkpoint as a Hugging Face model"},
    {"import-hf", mok::cli::cmd_import_hf, "turn a Hugging Face Mixtral folder into a checkpoint to fine-tune"},
};

void print_usage(FILE* out) {
  std::fprintf(out, "usage: mok <command> [options]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out, "\n'mok <command> --help' describes a command. Version %s (%s).\n", MOK_VERSION,
               mok::code_version());
}

}  // namespace

int main(int argc, char** argv) {
#if MOK_HAVE_CUDA
  mok::cuda::register_cuda_backend();  // parallel.device: cuda (the core says why when no GPU is usable)
#endif
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(stdout);
    return 0;
  }
  if (name == "--version") {
    std::printf("mok %s (%s)\n", MOK_VERSION, mok::code_version());
    return 0;
  }
  for (const Command& c : kCommands) {
    if (name == c.name) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "mok: unknown command '%s'\n\n", name.c_str());
  print_usage(stderr);
  return 2;
}
