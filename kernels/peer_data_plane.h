#pragma once
// PeerDataPlane: the DataPlane (core/parallel/data_plane.h) of CUDA ranks that are threads of
// one process (parallel.comm: peer), without NCCL: each rank copies what its peers offer it
// straight out of their memory (cudaMemcpyPeerAsync: the copy engines, over NVLink or PCIe
// between GPUs; a device copy where two ranks share a GPU). Because ranks may share a GPU
// (parallel.gpus: 0,0), the whole multi-rank GPU path — dispatchers, gradient sync,
// generation — runs and is checked on a machine with one GPU.
//
// Every collective is two rendezvous of the rank threads on the host (pointers and events,
// never data) and stream-ordered work on the device, so the host does not wait for the GPU:
//   1. each rank records a "ready" event after the work that produced what it offers, and
//      posts its offer to each peer (pieces: address, bytes) and the event;
//   2. each rank's stream waits for the ready events of the peers it takes from and copies
//      their offers into its own buffers;
//   3. each rank records a "done" event after its copies and posts it; its stream then waits
//      for the done events of the peers that took from it, so no later work on its stream
//      (the allocator reusing a buffer, a kernel writing it) can touch what a peer still reads.
//   all_to_all_rows   each peer's block of the send buffer, pulled by that peer
//   all_to_all_rows_group  every move's blocks in one pull (one pair of rendezvous)
//   start_group       that pull on the plane's transfer stream, after an event of the compute
//                     stream; finish makes the compute stream wait for its end
//   all_reduce_sum    the fixed order of the NCCL plane and the host: reduce-scatter by pulls
//                     into an (R, chunk) buffer, the owner adds the copies in rank order
//                     (kernels/rank_order_all_reduce.h), all-gather by pulls — the same bits
//   broadcast         the root's buffer, pulled by every other rank
// Bytes are counted by purpose and peer like the NCCL plane's, and each call's device time
// (kernels/collective_timing.h) is added at settle(). Not while a CUDA graph records (the
// events of other ranks cannot be waited on inside a capture).

namespace mok::cuda {

// Registers the peer data plane for CUDA contexts (called by register_cuda_backend).
void register_peer_data_plane();

}  // namespace mok::cuda
