#pragma once
// StoreError: every failure of the run store (not a database, newer schema, locked too
// long, disk full, unknown run). The message names the file so a user can act on it.

#include <stdexcept>
#include <string>

namespace mok {

class StoreError : public std::runtime_error {
 public:
  explicit StoreError(const std::string& message) : std::runtime_error(message) {}
};

// SQLite stayed busy (another writer held the lock) past the busy timeout. Write
// transactions catch this and retry a few times before passing it on.
class StoreBusyError : public StoreError {
 public:
  using StoreError::StoreError;
};

}  // namespace mok
