#include <cstdio>

#include "app/cli/commands.h"

namespace mok::cli {

int cmd_runs(int, char**) {
  std::fprintf(stderr, "mok runs: not available in this build yet\n");
  return 1;
}

}  // namespace mok::cli
