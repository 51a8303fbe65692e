import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix product C = A @ B^T with A stored as (M, K) and B as (N, K)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B.T)


M = 2048
K = 8192
N = 4096


def get_inputs():
    A = torch.rand(M, K)
    B = torch.rand(N, K)
    return [A, B]


def get_init_inputs():
    return []
