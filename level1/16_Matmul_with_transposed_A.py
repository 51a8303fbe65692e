import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix product C = A^T @ B with A stored as (K, M) and B as (K, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B)


M = 2048
K = 8192
N = 4096


def get_inputs():
    A = torch.rand(K, M)
    B = torch.rand(K, N)
    return [A, B]


def get_init_inputs():
    return []
