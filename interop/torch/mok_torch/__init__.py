"""PyTorch modules over the MoK Workbench core (docs/interop.md, "PyTorch modules").

    KittenLinear   nn.Linear that keeps its input for backward as the core's compact copy
    KittenPolicy   the core's choice of that copy (low-bit, low-rank, exact) and rank schedules
    MoKMoE         the core's MoE layer: router, stacked SwiGLU experts, aux and z losses
    SavedBytes     saved-activation bytes of a forward (torch's and the core's)
    swap_linears   puts KittenLinear in place of a model's nn.Linear layers

CPU tensors of float32 or float64 (the core's two builds); CUDA tensors of float32 or
bfloat16 when built for a torch with CUDA (cuda_built()): the core's kernels then compute in
the input's dtype on that GPU. The core's CPU loops use set_num_threads(n) threads (default 1).
"""
from . import _C
from .kitten_linear import KittenLinear
from .kitten_policy import KittenPolicy
from .moe import MoKMoE
from .saved_bytes import SavedBytes, core_saved_bytes
from .swap import swap_linears

set_num_threads = _C.set_num_threads
get_num_threads = _C.get_num_threads
core_memory = _C.memory
cuda_built = _C.cuda_built

__all__ = ["KittenLinear", "KittenPolicy", "MoKMoE", "SavedBytes", "core_saved_bytes", "swap_linears",
           "set_num_threads", "get_num_threads", "core_memory", "cuda_built"]
