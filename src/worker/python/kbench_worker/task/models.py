"""The task's models as both workers build and call them, and the device around a call.

Both sides follow KernelBench's contract so that weights match: seed 42 before
get_init_inputs and before the constructor, build on the CPU, then move to the device. One call
is seeded too, so references that draw random numbers repeat.
"""

import torch

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def seed_generators(value):
    """What torch.manual_seed does to the generators a worker draws from (the CPU's and each
    visible GPU's, once CUDA is initialized, as it is in a worker), without its ~0.2 ms of host
    time (it also walks MPS, XPU and MTIA, and torch._dynamo wraps it): a burst seeds each call
    inside the timed interval, and the warm-up's submission time sizes the blocker."""
    torch.default_generator.manual_seed(value)
    if torch.cuda.is_initialized():
        for generator in torch.cuda.default_generators:
            generator.manual_seed(value)


def init_inputs(task):
    seed_generators(42)
    return task.get_init_inputs()


def build(cls, init, device, precision):
    seed_generators(42)
    model = cls(*init)
    return model.to(device=device, dtype=DTYPES[precision]) if precision != "fp32" else model.to(device)


def forward(model, inputs, seed):
    """One call, with the RNG seeded so that references that draw random numbers repeat."""
    seed_generators(seed)
    with torch.no_grad():
        return model(*inputs)


def nbytes(values):
    """Bytes of the tensors among ``values``."""
    return sum(x.numel() * x.element_size() for x in values if isinstance(x, torch.Tensor))


def release_memory(device):
    """Give cached GPU memory back: the other worker on this GPU may need it next."""
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def synchronize(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()
