import torch
import torch.nn as nn


class Model(nn.Module):
    """diag(A) @ B computed as a broadcast: C[i, j] = A[i] * B[i, j]."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return A.unsqueeze(1) * B


M = 4096
N = 4096


def get_inputs():
    A = torch.rand(N)
    B = torch.rand(N, M)
    return [A, B]


def get_init_inputs():
    return []
