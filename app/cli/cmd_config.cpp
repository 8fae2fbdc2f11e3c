#include <cstdio>

#include "app/cli/commands.h"

namespace mok::cli {

int cmd_config(int, char**) {
  std::fprintf(stderr, "mok config: not available in this build yet\n");
  return 1;
}

}  // namespace mok::cli
