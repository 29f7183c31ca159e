"""Time sequence prediction, in the idioms of pytorch/examples' time_sequence_prediction: two
stacked LSTM cells stepped in a Python loop over the input's time steps, then ``future`` more
steps fed their own output, in double precision, trained with L-BFGS through a closure."""
import math

import torch
import torch.nn as nn
import torch.optim as optim


class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


def make_model():
    seq = Sequence()
    seq.double()
    return seq


def make_optimizer(seq):
    # use LBFGS as optimizer since we can load the whole data to train
    return optim.LBFGS(seq.parameters(), lr=0.8)


def make_closure(seq, optimizer, input, target):
    criterion = nn.MSELoss()

    def closure():
        optimizer.zero_grad()
        out = seq(input)
        loss = criterion(out, target)
        loss.backward()
        return loss

    return closure


def predict(seq, test_input, test_target, future):
    criterion = nn.MSELoss()
    with torch.no_grad():
        pred = seq(test_input, future=future)
        loss = criterion(pred[:, :-future], test_target)
    return pred, loss


def rmse(loss):
    return math.sqrt(loss.item())
