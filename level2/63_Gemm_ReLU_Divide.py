import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, ReLU, divide by a constant."""

    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        x = self.linear(x)
        x = torch.relu(x)
        x = x / self.divisor
        return x


batch_size = 1024
in_features = 8192
out_features = 8192
divisor = 2.0


def get_inputs():
    x = torch.rand(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features, divisor]
