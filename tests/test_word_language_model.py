"""The word-level language model of pytorch/examples, written in its idioms (``init_hidden`` with
``weight.new_zeros``, ``repackage_hidden``, gradient clipping, a hand-written SGD update, a
shorter last batch), compiled once with the sequence length and batch symbolic, against the
same loop run eagerly (whose LSTM/GRU/RNN match PyTorch: tests/test_recurrent.py)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import graphc as torch
import graphc.nn as nn
import graphc.nn.functional as F


class RNNModel(nn.Module):
    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.0):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.decoder.out_features)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


def repackage_hidden(h):
    if isinstance(h, (tuple, list)):
        return tuple(repackage_hidden(v) for v in h)
    return h.detach() if isinstance(h, torch.Tensor) else torch.tensor(h)  # (a plan returns arrays)


def make_step(model, lr=5.0):
    criterion = nn.NLLLoss()

    def train_step(data, targets, hidden):
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        return loss, hidden
    return train_step


@pytest.mark.parametrize("rnn_type", ["LSTM", "GRU", "RNN"])
def test_truncated_bptt_compiled_once_matches_eager(rnn_type):
    torch.manual_seed(0)
    bptt, bsz, ntokens = 7, 4, 50
    data = torch.tensor(np.random.default_rng(0).integers(0, ntokens, (45, bsz)))  # 44 = 6 * 7 + 2: a short last batch
    model = RNNModel(rnn_type, ntokens, 16, 16, 2)
    twin = copy.deepcopy(model)
    hidden = model.init_hidden(bsz)
    dims = {"data": {0: "T", 1: "N"}, "targets": {0: "T*N"}}
    dims.update({"hidden_0": {1: "N"}, "hidden_1": {1: "N"}} if rnn_type == "LSTM" else {"hidden": {1: "N"}})
    step = torch.compile(make_step(model), (data[:bptt], data[1:1 + bptt].reshape(-1), hidden), dynamic_dims=dims)
    assert sum(n.op == "scan" for n in step.graph.nodes) == 4  # 2 layers, forward and gradient: not per time step
    eager = make_step(twin)
    hidden_c, hidden_e = model.init_hidden(bsz), twin.init_hidden(bsz)
    for i in range(0, data.shape[0] - 1, bptt):
        seq_len = min(bptt, data.shape[0] - 1 - i)
        x, y = data[i:i + seq_len], data[i + 1:i + 1 + seq_len].reshape(-1)
        loss_c, hidden_c = step(x, y, repackage_hidden(hidden_c))
        loss_e, hidden_e = eager(x, y, repackage_hidden(hidden_e))
        assert float(loss_c) == pytest.approx(float(loss_e.numpy()), rel=1e-4)  # float32 over the steps so far
    for key, value in model.state_dict().items():
        np.testing.assert_allclose(np.asarray(value), np.asarray(twin.state_dict()[key]), rtol=1e-4, atol=1e-5)
