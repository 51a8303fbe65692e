import torch
import torch.nn as nn


class Model(nn.Module):
    """Single step of an Elman RNN cell that keeps its hidden state on the module."""

    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        # Plain tensor attribute (not a parameter or buffer), sized by the module-level batch_size.
        self.hidden = torch.randn((batch_size, hidden_size))

        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)  # input to hidden
        self.h2o = nn.Linear(hidden_size, output_size)  # hidden to output
        self.tanh = nn.Tanh()

    def forward(self, x: torch.Tensor, initial_hidden=None) -> torch.Tensor:
        if initial_hidden is not None:
            self.hidden.copy_(initial_hidden)
        self.hidden = self.hidden.to(x.device)
        combined = torch.cat((x, self.hidden), dim=1)  # concatenate input and hidden state
        self.hidden = self.tanh(self.i2h(combined))  # update hidden state
        output = self.h2o(self.hidden)
        return output


batch_size = 256
input_size = 16384
hidden_size = 16384
output_size = 8192
sequence_length = 256


def get_inputs():
    return [torch.rand(batch_size, input_size), torch.rand(batch_size, hidden_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
