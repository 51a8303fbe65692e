import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean over one dimension (keepdim=False)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.dim)


batch_size = 128
dim1 = 4096
dim2 = 4095


def get_inputs():
    x = torch.rand(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [1]
