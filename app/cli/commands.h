#pragma once
// The subcommands of `mok`. Each takes (argc, argv) with argv[0] = the subcommand name and
// returns the process exit code: 0 ok, 1 failure while running, 2 bad usage or bad config.

namespace mok::cli {

int cmd_train(int argc, char** argv);     // cmd_train.cpp
int cmd_config(int argc, char** argv);    // cmd_config.cpp
int cmd_runs(int argc, char** argv);      // cmd_runs.cpp
int cmd_generate(int argc, char** argv);  // cmd_generate.cpp
int cmd_plan(int argc, char** argv);      // cmd_plan.cpp
int cmd_export(int argc, char** argv);    // cmd_export.cpp
int cmd_import_hf(int argc, char** argv); // cmd_import_hf.cpp

}  // namespace mok::cli
