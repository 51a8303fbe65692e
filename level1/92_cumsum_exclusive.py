import torch
import torch.nn as nn


class Model(nn.Module):
    """Exclusive cumulative sum along a dimension (first element 0)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        zeros = torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim))
        shifted = torch.cat((zeros, x.narrow(self.dim, 0, x.size(self.dim) - 1)), dim=self.dim)
        return torch.cumsum(shifted, dim=self.dim)


batch_size = 32768
input_shape = (32768,)
dim = 1


def get_inputs():
    return [torch.rand(batch_size, *input_shape)]


def get_init_inputs():
    return [dim]
