"""Saved-activation bytes of one forward: what torch's autograd keeps plus what the core keeps.

    with SavedBytes(model.parameters()) as saved:
        loss = model(x)
    saved.total_bytes   # torch_bytes + core_bytes, held from here until backward

torch_bytes: the distinct storages autograd saved during the block
(torch.autograd.graph.saved_tensors_hooks), each counted once, parameters left out (they are
held anyway). core_bytes: the growth of the core's saved-activation bytes over the block (its
MemoryTracker, float32 and float64 builds): KittenLinear's compact copies and MoKMoE's
saved tensors, which torch's hooks do not see.
"""
import torch

from . import _C


def core_saved_bytes():
    """Saved-activation bytes the core holds now (both builds)."""
    return sum(_C.memory(f64)["saved_activations.live"] for f64 in (False, True))


class SavedBytes:
    def __init__(self, exclude=()):
        self._exclude = {p.data_ptr() for p in exclude}
        self._storages = {}  # storage address → (tensor, bytes); the tensors keep addresses unique
        self.torch_bytes = 0
        self.core_bytes = 0

    def _pack(self, t):
        if hasattr(t, "untyped_storage"):  # torch ≥ 2.0
            storage = t.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
        else:
            storage = t.storage()
            key, size = storage.data_ptr(), storage.size() * storage.element_size()
        if key not in self._exclude and key not in self._storages:
            self._storages[key] = (t, size)
        return t

    def __enter__(self):
        self._core_before = core_saved_bytes()
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)
        self.torch_bytes = sum(b for _, b in self._storages.values())
        self._storages = {}
        self.core_bytes = core_saved_bytes() - self._core_before
        return False

    @property
    def total_bytes(self):
        return self.torch_bytes + self.core_bytes
