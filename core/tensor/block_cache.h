#pragma once
// BlockCache: the memory behind every host Tensor and ByteBuffer. A training step allocates
// and frees the same activation shapes each step (≈100 MB for the quickstart model at batch
// 16); fresh memory from the system costs a page fault per 4 KiB and a zero-fill, so freed
// blocks are kept here, grouped by size class, and handed out again.
//
// Size classes: the request rounded up to a multiple of 64 B up to 4 KiB, then to one of
// eight classes per power of two (waste ≤ 1/8), so expert batches whose row count changes a
// little each step still find a block.
//
// Small blocks (< 256 KiB) come from malloc. Large ones are mapped from the system (mmap) and
// unmapped when they leave the cache, so what they free is really given back: malloc would
// keep it in its heap once its dynamic mmap threshold has grown. A step whose sizes differ
// from the last one's (kitten activations: full-size temporaries in forward, other sizes in
// backward) would map new blocks while the cache holds old ones of other sizes, so a large
// request that finds no block of its class is made of the pages of cached large blocks
// (moved with mremap: resident, no page fault or zero-fill) and takes fresh pages only for
// what they do not cover. Reserved bytes (live + cached) then grow only when the cache holds
// no large block, and the peak of reserved bytes is the peak of live bytes.
//
// Accounting is in block bytes (size classes), process-wide: the MemoryTracker counts what
// tensors asked for, per rank; live_bytes() here is at least the sum of the ranks' live
// figures on the host. Blocks are 64-byte aligned (large ones page-aligned).

#include <cstdint>

#include "core/real.h"

MOK_NN_BEGIN

class BlockCache {
 public:
  // Requests of at least this many bytes get mapped blocks.
  static constexpr int64_t kLargeBlockBytes = int64_t(256) << 10;

  // A block of at least `bytes` (> 0), 64-byte aligned, contents undefined.
  static void* allocate(int64_t bytes);
  // Returns a block from allocate(bytes) (same `bytes`).
  static void release(void* block, int64_t bytes);

  // The size class of a request: the bytes of the block that serves it.
  static int64_t block_bytes(int64_t bytes);
  // Whether freed large blocks serve other sizes (false under AddressSanitizer, which needs
  // malloc'd blocks, and where pages are not 4 KiB).
  static bool reuses_across_sizes();

  static int64_t live_bytes();      // blocks handed out and not yet released
  static int64_t cached_bytes();    // free blocks kept for reuse
  static int64_t reserved_bytes();  // live + cached: what the cache holds from the system
  // Highest reserved_bytes() since the last reset_peak_reserved() (or the start).
  static int64_t peak_reserved_bytes();
  // Highest live_bytes() since the last reset_peak_reserved() (or the start).
  static int64_t peak_live_bytes();
  static void reset_peak_reserved();  // both peaks

  // Upper bound on cached_bytes(); blocks beyond it go back to the system (all cached
  // blocks, if the cache already holds more). Default 1 GiB.
  static void set_limit(int64_t bytes);
  // Gives every cached block back to the system.
  static void trim();
};

MOK_NN_END
