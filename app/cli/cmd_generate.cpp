#include <cstdio>

#include "app/cli/commands.h"

namespace mok::cli {

int cmd_generate(int, char**) {
  std::fprintf(stderr, "mok generate: not available in this build yet\n");
  return 1;
}

}  // namespace mok::cli
