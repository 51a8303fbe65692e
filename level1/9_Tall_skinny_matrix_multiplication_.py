import torch
import torch.nn as nn


class Model(nn.Module):
    """Tall-skinny product: (M, N) @ (N, M) -> (M, M) with small inner dimension N."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


M = 32768
N = 32


def get_inputs():
    A = torch.rand(M, N)
    B = torch.rand(N, M)
    return [A, B]


def get_init_inputs():
    return []
