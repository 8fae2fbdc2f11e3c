#pragma once
// StepGraph: the device work of a training step's forward and backward, recorded once and
// replayed at every later step (CUDA graphs), so that the GPU runs a step's several hundred
// kernels from one launch instead of waiting on the host's launches between them.
//
// Recording runs the step's own code (the same layers, the same ops) while the backend
// records instead of computing; nothing runs until replay(). That holds only for a step whose
// shapes and host-side choices are the same every step (a dense model: no expert counts
// cross to the host), and two things need care:
//   - copies from the host: a copy recorded from memory declared with add_input (the batch's
//     tokens and targets) reads that memory again at every replay; any other source (tables,
//     constants) is read once, when recorded;
//   - values the host reads back: a dense step's forward reads only its cross-entropy sums.
//     While recording, Ops::cross_entropy returns its count (known on the host from the
//     targets) and a NaN loss sum; each replay's sums are read with cross_entropy_sums().
// Anything else that needs a value on the host in the middle of the step makes recording
// fail (end() or the op throws): the caller then abandons the graph and runs op by op.
//
// Usage: add_input(...); record([&] { <forward/backward> }) (or begin(); ...; end()); then per
// step: refill the inputs' host memory, replay(), later cross_entropy_sums().

#include <cstddef>
#include <vector>

#include "core/backend/cross_entropy_kernel.h"

MOK_NN_BEGIN

class StepGraph {
 public:
  virtual ~StepGraph() = default;

  // Host memory whose contents each replay reads anew.
  virtual void add_input(const void* host, size_t bytes) = 0;
  // The calling rank's ops record from here on (its stream, its allocator).
  virtual void begin() = 0;
  // Stops recording and prepares the graph; throws when what was recorded cannot replay.
  virtual void end() = 0;
  // Stops recording and drops what was recorded (after a throw between begin and end).
  virtual void abandon() noexcept = 0;
  virtual bool ready() const = 0;  // end() succeeded

  // begin(), `step`, end(); when anything throws, abandons what was recorded and rethrows.
  template <class Step>
  void record(Step&& step) {
    try {
      begin();
      step();
      end();
    } catch (...) {
      abandon();
      throw;
    }
  }

  // Enqueues the recorded work, its copies reading the inputs' memory as it is now; returns
  // without waiting for the device.
  virtual void replay() = 0;
  // The cross-entropy sums of the last replay, in the order they were recorded (waits for it).
  virtual std::vector<CrossEntropySum> cross_entropy_sums() = 0;
  // Kernels and copies in the recorded graph (what one replay launches).
  virtual size_t nodes() const = 0;
};

MOK_NN_END
