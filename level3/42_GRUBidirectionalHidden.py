import torch
import torch.nn as nn


class Model(nn.Module):
    """Bidirectional stacked GRU (sequence-first); returns the final hidden state of every layer and direction."""

    def __init__(self, input_size, hidden_size, num_layers=3, bias=True, batch_first=False):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers, bias, batch_first, dropout=0, bidirectional=True)

    def forward(self, x, h0):
        output, h_n = self.gru(x, h0)
        return h_n


batch_size = 10
seq_len = 512
input_size = 128
hidden_size = 256
num_layers = 6


def get_inputs():
    return [
        torch.rand(seq_len, batch_size, input_size),
        torch.rand((num_layers * 2, batch_size, hidden_size)),
    ]


def get_init_inputs():
    return [input_size, hidden_size, num_layers]
