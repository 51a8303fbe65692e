import torch
import torch.nn as nn


class Model(nn.Module):
    """Elman RNN unrolled over a (seq, batch, feature) sequence; returns the per-step outputs."""

    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size

        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)  # input to hidden
        self.h2o = nn.Linear(hidden_size, output_size)  # hidden to output
        self.tanh = nn.Tanh()

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        seq_len = x.size(0)
        hidden = h0
        outputs = []
        for t in range(seq_len):
            combined = torch.cat((x[t], hidden), dim=1)
            hidden = self.tanh(self.i2h(combined))
            outputs.append(self.h2o(hidden))
        return torch.stack(outputs, dim=0)  # (seq_len, batch_size, output_size)


batch_size = 8
input_size = 1024
hidden_size = 256
output_size = 128
sequence_length = 256


def get_inputs():
    return [
        torch.rand(sequence_length, batch_size, input_size),
        torch.rand(batch_size, hidden_size),
    ]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
