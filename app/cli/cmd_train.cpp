#include <cstdio>

#include "app/cli/commands.h"

namespace mok::cli {

int cmd_train(int, char**) {
  std::fprintf(stderr, "mok train: not available in this build yet\n");
  return 1;
}

}  // namespace mok::cli
