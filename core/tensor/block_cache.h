#pragma once
// BlockCache: the memory behind every Tensor and ByteBuffer. A training step allocates and
// frees the same activation shapes each step (≈100 MB for the quickstart model); fresh
// memory from the system costs a page fault per 4 KiB and a zero-fill, so freed blocks are
// kept here, grouped by size class, and handed out again.
//
// Accounting: the MemoryTracker counts the bytes held by tensors (what was asked for), not
// the cache; cached_bytes() says how much the cache holds on top of that. Blocks are 64-byte
// aligned; a block's size is its size class (the request rounded up by at most 1/8), so a
// block serves any request of its class.

#include <cstdint>

#include "core/real.h"

MOK_NN_BEGIN

class BlockCache {
 public:
  // A block of at least `bytes` (> 0), 64-byte aligned, contents undefined.
  static void* allocate(int64_t bytes);
  // Returns a block from allocate(bytes) (same `bytes`).
  static void release(void* block, int64_t bytes);

  // Bytes held by the cache (free blocks), beyond what tensors hold.
  static int64_t cached_bytes();
  // Upper bound on cached_bytes(); blocks beyond it go back to the system (all cached
  // blocks, if the cache already holds more). Default 1 GiB.
  static void set_limit(int64_t bytes);
  // Gives every cached block back to the system.
  static void trim();
};

MOK_NN_END
