import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose3d, LayerNorm over the last dim, GELU, then scale."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias=True, eps=1e-05, scaling_factor=1.0):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=bias
        )
        # LayerNorm(out_channels) acts on the LAST dim (width), which must equal out_channels.
        self.layer_norm = nn.LayerNorm(out_channels, eps=eps)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.conv_transpose(x)
        x = self.layer_norm(x)
        x = F.gelu(x)
        x = x * self.scaling_factor
        return x


batch_size = 32
in_channels = 32
out_channels = 64
D = 16
H = 32
W = 32
kernel_size = 4
stride = 2
padding = 1
bias = True
eps = 1e-05
scaling_factor = 1.0


def get_inputs():
    return [torch.rand(batch_size, in_channels, D, H, W)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, bias, eps, scaling_factor]
