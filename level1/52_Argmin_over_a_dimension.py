import torch
import torch.nn as nn


class Model(nn.Module):
    """Returns the indices of the minimum values along a dimension (argmin)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmin(x, dim=self.dim)


batch_size = 128
dim1 = 4096
dim2 = 4095
dim = 1


def get_inputs():
    x = torch.rand(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [dim]
