"""Packed sequences (graphc/nn/utils/rnn.py) through RNN, LSTM and GRU against PyTorch 2.13:
``pack_padded_sequence`` (sorted, or not with ``enforce_sorted=False``), the layer on the
PackedSequence, ``pad_packed_sequence``; the packed rows (``data``, ``batch_sizes``), the
padded outputs, ``h_n`` (and ``c_n``) and the gradients of the input, the initial states and
every parameter. Then the same layer compiled with the lengths as a plan input runs other
batches, lengths and sequence lengths from one plan, and trains as eagerly.

float64 on both sides: the same gate math summed in another order, so 1e-10 absolute is
rounding with room (a wrong mask, a state read past a sequence's end or a reversed direction
starting at the padded end would be off by 1e-2 or more). Without torch the references replay
from tests/data/torch_test_packed_sequences.npz (``pytest --record-torch-refs``)."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn
from graphc.nn.utils.rnn import (PackedSequence, pack_padded_sequence, pack_sequence, pad_packed_sequence,
                                 unpack_sequence)

TOL = 1e-10
IN, HID = 3, 4
# name: (layer, kwargs, lengths, padded length, enforce_sorted, with initial states)
CASES = {
    "lstm_sorted": ("LSTM", {}, [5, 3, 3, 1], 5, True, False),
    "lstm_bidirectional_2layers_unsorted": ("LSTM", {"num_layers": 2, "bidirectional": True}, [2, 5, 1, 4], 6, False,
                                            True),
    "lstm_proj_batch_first": ("LSTM", {"proj_size": 2, "batch_first": True, "bidirectional": True}, [4, 1, 3], 4,
                              False, True),
    "gru_bidirectional_unsorted_states": ("GRU", {"bidirectional": True}, [3, 6, 2], 7, False, True),
    "gru_2layers_batch_first": ("GRU", {"num_layers": 2, "batch_first": True}, [6, 4, 4, 2], 6, True, False),
    "rnn_relu_bidirectional": ("RNN", {"nonlinearity": "relu", "bidirectional": True}, [4, 2, 3], 4, False, False),
}


def _inputs(name):
    kind, kw, lengths, steps, _, given = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    batch, dirs, layers = len(lengths), 2 if kw.get("bidirectional") else 1, kw.get("num_layers", 1)
    x = rng.standard_normal((batch, steps, IN) if kw.get("batch_first") else (steps, batch, IN))
    out_h = kw.get("proj_size", 0) or HID
    states = {}
    if given:
        states["h0"] = rng.standard_normal((layers * dirs, batch, out_h)) * 0.5
        if kind == "LSTM":
            states["c0"] = rng.standard_normal((layers * dirs, batch, HID)) * 0.5
    weights = {"out": rng.standard_normal(x.shape[:-1] + (dirs * out_h,))[:, :max(lengths)] if kw.get("batch_first")
               else rng.standard_normal(x.shape[:-1] + (dirs * out_h,))[:max(lengths)],
               "h": rng.standard_normal((layers * dirs, batch, out_h))}
    return x, states, weights


def _graphc_layer(name):
    kind, kw, *_ = CASES[name]
    gc.manual_seed(len(name))
    return getattr(nn, kind)(IN, HID, **kw).double()


def run(lib, name, layer):
    """Pack, run, pad; a loss weighting every output; its gradients. ``lib`` is torch or graphc."""
    kind, kw, lengths, _, enforce, _ = CASES[name]
    x, states, weights = _inputs(name)
    tensor = lib.tensor
    xt = tensor(x, requires_grad=True) if lib is not gc else tensor(x).requires_grad_()
    st = {k: (tensor(v, requires_grad=True) if lib is not gc else tensor(v).requires_grad_()) for k, v in states.items()}
    utils = lib.nn.utils.rnn
    packed = utils.pack_padded_sequence(xt, lengths, batch_first=kw.get("batch_first", False), enforce_sorted=enforce)
    hx = None if not st else ((st["h0"], st["c0"]) if kind == "LSTM" else st["h0"])
    out, hn = layer(packed, hx)
    h = hn[0] if kind == "LSTM" else hn
    padded, out_lengths = utils.pad_packed_sequence(out, batch_first=kw.get("batch_first", False), padding_value=-3.0)
    loss = (padded * tensor(weights["out"])).sum() + (h * tensor(weights["h"])).sum()
    loss.backward()
    got = {"data": packed.data, "batch_sizes": packed.batch_sizes, "out_data": out.data, "padded": padded,
           "lengths": out_lengths, "h": h, "grad_x": xt.grad}
    if kind == "LSTM":
        got["c"] = hn[1]
    got.update({f"grad_{k}": v.grad for k, v in st.items()})
    got.update({f"grad_{k}": p.grad for k, p in layer.named_parameters()})
    return {k: np.asarray(v.detach().numpy() if hasattr(v, "detach") else v.numpy()) for k, v in got.items()}


def _torch_run(name, state):
    import torch

    kind, kw, *_ = CASES[name]
    layer = getattr(torch.nn, kind)(IN, HID, **kw).double()
    layer.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    return run(torch, name, layer)


@pytest.mark.parametrize("name", list(CASES))
def test_packed_layers_match_torch(name, torch_ref):
    layer = _graphc_layer(name)
    state = {k: np.asarray(v) for k, v in layer.state_dict().items()}
    want = torch_ref([name, CASES[name][1:], _inputs(name), state], lambda: _torch_run(name, state))
    got = run(gc, name, layer)
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key].shape == want[key].shape, key
        np.testing.assert_allclose(got[key], want[key], rtol=0, atol=TOL, err_msg=key)


def _compiled_function(layer, kind, batch_first):
    def forward(x, lengths):
        packed = pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=False)
        out, hn = layer(packed)
        padded, _ = pad_packed_sequence(out, batch_first=batch_first)
        return padded, (hn[0] if kind == "LSTM" else hn)
    return forward


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_one_plan_runs_other_batches_lengths_and_sequence_lengths(kind):
    gc.manual_seed(0)
    layer = getattr(nn, kind)(IN, HID, num_layers=2, bidirectional=True, batch_first=True)
    forward = _compiled_function(layer, kind, True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6, IN)).astype(np.float32)
    plan = gc.compile(forward, (x, np.array([6, 2, 5, 3])), dynamic_dims={"x": {0: "N", 1: "T"}})
    assert sum(n.op == "scan" for n in plan.graph.nodes) == 5  # 2 layers x 2 directions, and the mask's count
    for batch, lengths in [(4, [6, 2, 5, 3]), (3, [9, 1, 4]), (2, [2, 2])]:
        x = rng.standard_normal((batch, max(lengths), IN)).astype(np.float32)
        out, h = plan(x, np.array(lengths))
        out_e, h_e = forward(gc.tensor(x), lengths)
        # float32, the same ops in the same order: equal but for BLAS blocking at another batch size
        np.testing.assert_allclose(out, out_e.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(h, h_e.numpy(), rtol=1e-5, atol=1e-6)
        for b, n in enumerate(lengths):
            assert not out[b, n:].any()  # zero past each sequence's end


def test_a_compiled_training_step_on_packed_input_matches_eager():
    rng = np.random.default_rng(1)
    models = []
    for _ in range(2):
        gc.manual_seed(3)
        models.append(nn.ModuleDict({"rnn": nn.GRU(IN, HID, bidirectional=True), "head": nn.Linear(2 * HID, 1)}).double())

    def make_step(model):
        opt = gc.optim.SGD(model.parameters(), lr=0.1)

        def step(x, lengths, y):
            opt.zero_grad()
            _, h = model["rnn"](pack_padded_sequence(x, lengths, enforce_sorted=False))
            loss = ((model["head"](gc.cat([h[0], h[1]], -1)) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        return step
    eager, compiled = make_step(models[0]), None
    batches = [(rng.standard_normal((5, 3, IN)), np.array([5, 2, 4]), rng.standard_normal((3, 1))),
               (rng.standard_normal((7, 2, IN)), np.array([3, 7]), rng.standard_normal((2, 1)))]
    compiled = gc.compile(make_step(models[1]), batches[0], dynamic_dims={"x": {0: "T", 1: "N"}})
    for x, lengths, y in batches * 2:
        loss_e = eager(gc.tensor(x), gc.tensor(lengths), gc.tensor(y))
        loss_c = compiled(x, lengths, y)
        assert float(loss_c) == pytest.approx(float(loss_e.numpy()), rel=1e-12)  # float64, the same ops
    for (name, a), b in zip(models[0].state_dict().items(), models[1].state_dict().values()):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-12, atol=1e-14, err_msg=name)


def test_packed_rows_round_trip_and_pack_sequence():
    rng = np.random.default_rng(2)
    seqs = [gc.tensor(rng.standard_normal((n, 2))) for n in (2, 4, 1)]
    packed = pack_sequence(seqs, enforce_sorted=False)
    assert packed.batch_sizes.tolist() == [3, 2, 1, 1]
    assert packed.sorted_indices.tolist() == [1, 0, 2] and packed.unsorted_indices.tolist() == [1, 0, 2]
    again = PackedSequence(*packed)  # PyTorch's four fields build the same sequence
    for a, b in zip(unpack_sequence(again), seqs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    data, batch_sizes, sorted_indices, unsorted_indices = packed
    assert tuple(data.shape) == (7, 2) and sorted_indices.tolist() == [1, 0, 2]
    assert pack_sequence(seqs[1:2] + seqs[:1]).sorted_indices is None


def test_bad_lengths_are_refused_with_pytorchs_messages():
    x = gc.zeros(4, 3, 2)
    with pytest.raises(gc.GraphcError, match="sorted in decreasing order"):
        pack_padded_sequence(x, [2, 4, 1])
    with pytest.raises(gc.GraphcError, match="at least 1"):
        pack_padded_sequence(x, [4, 0, 1])
    with pytest.raises(gc.GraphcError, match="longer than"):
        pack_padded_sequence(x, [5, 1, 1])
    with pytest.raises(gc.GraphcError, match="expected 3 lengths"):
        pack_padded_sequence(x, [4, 1])
    with pytest.raises(gc.GraphcError, match="total_length"):
        pad_packed_sequence(pack_padded_sequence(x, [4, 2, 1]), total_length=3)
    padded, _ = pad_packed_sequence(pack_padded_sequence(x, [3, 2, 1]), total_length=6)
    assert tuple(padded.shape) == (6, 3, 2)  # trimmed to the longest, then padded to total_length
    with pytest.raises(gc.GraphcError, match="PackedSequence"):
        nn.LSTMCell(2, 3)(pack_padded_sequence(x, [4, 2, 1]))

    def reads_rows(x, lengths):
        return pack_padded_sequence(x, lengths).data
    with pytest.raises(gc.GraphcError, match="lengths' values"):
        gc.compile(reads_rows, (np.zeros((4, 3, 2), np.float32), np.array([4, 2, 1])))
