// mok config: validate, print and document experiment configs.
//   mok config validate FILE [--set key=value]... [--json]
//   mok config print FILE [--set key=value]...
//   mok config schema [--markdown]
// Exit codes: 0 ok, 2 bad config or bad usage. Nothing is ever written to disk.

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "core/config/config_io.h"
#include "core/util/json_writer.h"

namespace mok::cli {
namespace {

const char* kUsage =
    "usage:\n"
    "  mok config validate FILE [--set key=value]... [--json]\n"
    "      check a config; prints 'FILE: ok' or 'file:line:column: key: problem'\n"
    "      (exit 0 or 2). With --json the last line is one JSON object:\n"
    "      {\"ok\", \"error\", \"file\", \"line\", \"column\", \"key\"}.\n"
    "  mok config print FILE [--set key=value]...\n"
    "      the config with every key, normalized, as YAML on stdout\n"
    "  mok config schema [--markdown]\n"
    "      every key with its type, default, allowed values and meaning\n"
    "\n"
    "--set dotted.key=value overrides one key after the file is read, e.g.\n"
    "  --set train.steps=50 --set kittens.mode=kitten --set kittens.layers.2.rank=32\n"
    "Errors in an override are reported as --set:N:COLUMN for the N-th --set.\n";

struct Args {
  std::string file;
  std::vector<std::string> overrides;
  bool json = false;
  bool markdown = false;
};

// Parses the options after the verb; returns false (with a message printed) on bad usage.
bool parse_args(int argc, char** argv, int first, bool takes_file, Args& a) {
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--set") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "mok config: --set needs key=value\n");
        return false;
      }
      a.overrides.push_back(argv[++i]);
    } else if (arg.rfind("--set=", 0) == 0) {
      a.overrides.push_back(arg.substr(6));
    } else if (arg == "--json") {
      a.json = true;
    } else if (arg == "--markdown") {
      a.markdown = true;
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "mok config: unknown option '%s'\n\n%s", arg.c_str(), kUsage);
      return false;
    } else if (takes_file && a.file.empty()) {
      a.file = arg;
    } else {
      std::fprintf(stderr, "mok config: unexpected argument '%s'\n\n%s", arg.c_str(), kUsage);
      return false;
    }
  }
  if (takes_file && a.file.empty()) {
    std::fprintf(stderr, "mok config: missing FILE\n\n%s", kUsage);
    return false;
  }
  return true;
}

int validate(const Args& a) {
  JsonWriter j;
  int rc = 0;
  try {
    load_experiment_config(a.file, a.overrides);
    std::printf("%s: ok\n", a.file.c_str());
    j.begin_object().key("ok").value(true).key("error").null().key("file").value(a.file);
    j.key("line").value(0).key("column").value(0).key("key").value("").end_object();
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    j.begin_object().key("ok").value(false).key("error").value(e.what()).key("file").value(e.file);
    j.key("line").value(e.line).key("column").value(e.column).key("key").value(e.key_path).end_object();
    rc = 2;
  }
  if (a.json) std::printf("%s\n", j.str().c_str());
  return rc;
}

int print(const Args& a) {
  try {
    const ExperimentConfig c = load_experiment_config(a.file, a.overrides);
    std::fputs(experiment_config_to_yaml(c).c_str(), stdout);
    return 0;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}

}  // namespace

int cmd_config(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string verb = argv[1];
  if (verb == "--help" || verb == "-h" || verb == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  Args a;
  if (verb == "validate") {
    if (!parse_args(argc, argv, 2, true, a)) return 2;
    return validate(a);
  }
  if (verb == "print") {
    if (!parse_args(argc, argv, 2, true, a)) return 2;
    if (a.json) {
      std::fprintf(stderr, "mok config print: --json is not an option of print (the output is YAML)\n");
      return 2;
    }
    return print(a);
  }
  if (verb == "schema" || verb == "--schema") {
    if (!parse_args(argc, argv, 2, false, a)) return 2;
    std::fputs((a.markdown ? config_schema_markdown() : config_schema_text()).c_str(), stdout);
    return 0;
  }
  std::fprintf(stderr, "mok config: unknown subcommand '%s'\n\n%s", verb.c_str(), kUsage);
  return 2;
}

}  // namespace mok::cli
