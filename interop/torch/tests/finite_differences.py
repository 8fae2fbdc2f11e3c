"""Central finite differences of a scalar function, against autograd's gradients.

torch.autograd.gradcheck runs backward several times through one forward (its reentrancy
check); the core's layers free what they kept at the first backward, as a training step
does, so these tests differentiate numerically themselves — as tests/nn/gradcheck.h does
for the core in C++: h = 1e-6 in float64, relative error ‖num − analytic‖/‖num‖ per tensor.
"""
import torch


def relative_errors(loss_fn, tensors, h=1e-6):
    """{index: ‖numerical − analytic‖/‖numerical‖} for each tensor of `tensors` (float64 leaves).

    loss_fn() builds the graph from the tensors and returns a scalar; it is called once with
    gradients and 2 times per element without.
    """
    for t in tensors:
        t.grad = None
    loss_fn().backward()
    analytic = [t.grad.detach().clone() for t in tensors]
    errors = {}
    with torch.no_grad():
        for i, t in enumerate(tensors):
            numerical = torch.zeros_like(t)
            flat, num_flat = t.view(-1), numerical.view(-1)
            for j in range(flat.numel()):
                keep = flat[j].item()
                flat[j] = keep + h
                up = loss_fn().item()
                flat[j] = keep - h
                down = loss_fn().item()
                flat[j] = keep
                num_flat[j] = (up - down) / (2 * h)
            errors[i] = ((numerical - analytic[i]).norm() / numerical.norm().clamp_min(1e-300)).item()
    return errors
