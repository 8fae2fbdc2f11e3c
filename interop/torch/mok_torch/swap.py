"""swap_linears: replaces a model's nn.Linear layers by KittenLinear ones, weights kept."""
from torch import nn

from .kitten_linear import KittenLinear


def swap_linears(model, policy, select=None):
    """Replaces every nn.Linear in `model` for which select(name) is true (default: all).

    Each new layer asks `policy` with layer = its position among the swapped layers (0, 1, …,
    in the order of model.named_modules()) and kind "<name>.input", so the policy's per-layer
    ranks and errors and its `kinds` overrides (by name prefix) apply. Returns the swapped
    names in order.
    """
    modules = dict(model.named_modules())
    swapped = []
    for name, module in list(modules.items()):
        if type(module) is not nn.Linear or not name or (select is not None and not select(name)):
            continue
        parent_name, _, child_name = name.rpartition(".")
        layer = KittenLinear.from_linear(module, policy=policy, layer=len(swapped), kind=f"{name}.input")
        setattr(modules[parent_name], child_name, layer)
        swapped.append(name)
    return swapped
