#pragma once
// The code version of this build (`git describe --always --dirty --tags` at configure time,
// "unknown" outside a git checkout), recorded with every run and checkpoint.

namespace mok {

const char* code_version();

}  // namespace mok
