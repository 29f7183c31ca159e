"""RNN, LSTM, GRU and their cells (graphc/nn/recurrent.py) against PyTorch 2.13: torch's own
initial weights load through ``load_state_dict``; outputs, final states and gradients (of
the input, the initial states and every parameter) agree eagerly and compiled; three SGD
training steps (at three sequence lengths) compiled from a PyTorch-idiom step function
agree with torch's; one plan
runs at several sequence lengths (``dynamic_dims``) with one ``scan`` node per layer and
direction, and saves and loads.

Comparisons run in float64, where agreement is to rounding (the same gate math in a
different summation order): 1e-10 absolute leaves room for that and would catch any
wrong gate, bias or direction. Without torch the references replay from
tests/data/torch_test_recurrent.npz (``pytest --record-torch-refs`` rewrites it)."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.nn.recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell

TOL = 1e-10  # float64: rounding only (see the module docstring)
IN, HID = 4, 5

LAYERS = {"RNN": RNN, "LSTM": LSTM, "GRU": GRU}
CELLS = {"RNNCell": RNNCell, "LSTMCell": LSTMCell, "GRUCell": GRUCell}

# name: (class, kwargs, time-major batched?, given initial states?)
CONFIGS = {
    "rnn_tanh": ("RNN", {}, True, False),
    "rnn_relu_2layers": ("RNN", {"nonlinearity": "relu", "num_layers": 2}, True, False),
    "lstm": ("LSTM", {}, True, False),
    "gru": ("GRU", {}, True, False),
    "rnn_bidirectional_states": ("RNN", {"bidirectional": True}, True, True),
    "lstm_2layers_bidirectional": ("LSTM", {"num_layers": 2, "bidirectional": True}, True, False),
    "lstm_states_batch_first": ("LSTM", {"batch_first": True, "num_layers": 2}, True, True),
    "lstm_proj": ("LSTM", {"proj_size": 3, "bidirectional": True}, True, True),
    "gru_2layers_bidirectional_batch_first": ("GRU", {"num_layers": 2, "bidirectional": True, "batch_first": True},
                                              True, True),
    "gru_no_bias": ("GRU", {"bias": False}, True, False),
    "rnn_unbatched": ("RNN", {"num_layers": 2}, False, True),
    "lstm_unbatched": ("LSTM", {"bidirectional": True}, False, True),
    "gru_unbatched_batch_first": ("GRU", {"batch_first": True}, False, False),
}
T, N = 6, 3


def _shapes(kind, kw, batched):
    dirs = 2 if kw.get("bidirectional") else 1
    layers = kw.get("num_layers", 1)
    out_h = kw.get("proj_size", 0) or HID
    x = ((N, T, IN) if kw.get("batch_first") else (T, N, IN)) if batched else (T, IN)
    state = (layers * dirs, N) if batched else (layers * dirs,)
    return x, state + (out_h,), state + (HID,), dirs, layers, out_h


def _inputs(name):
    kind, kw, batched, given = CONFIGS[name]
    x_shape, h_shape, c_shape, dirs, _, out_h = _shapes(kind, kw, batched)
    rng = np.random.default_rng(sum(map(ord, name)))
    x = rng.standard_normal(x_shape)
    states = {}
    if given:
        states["h0"] = rng.standard_normal(h_shape) * 0.5
        if kind == "LSTM":
            states["c0"] = rng.standard_normal(c_shape) * 0.5
    out_shape = x_shape[:-1] + (dirs * out_h,)
    weights = {"out": rng.standard_normal(out_shape), "h": rng.standard_normal(h_shape)}
    if kind == "LSTM":
        weights["c"] = rng.standard_normal(c_shape)
    return x, states, weights


def _loss(out, h, c, w, ops):
    loss = (out * ops(w["out"])).sum() + (h * ops(w["h"])).sum()
    return loss + (c * ops(w["c"])).sum() if c is not None else loss


def torch_layer(name, x, states, weights):
    import torch

    kind, kw, _, _ = CONFIGS[name]
    torch.manual_seed(0)
    model = getattr(torch.nn, kind)(IN, HID, **kw).double()
    init = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    xt = torch.tensor(x, requires_grad=True)
    st = {k: torch.tensor(v, requires_grad=True) for k, v in states.items()}
    if kind == "LSTM":
        out, (h, c) = model(xt, (st["h0"], st["c0"]) if st else None)
    else:
        out, h = model(xt, st.get("h0"))
        c = None
    loss = _loss(out, h, c, weights, torch.tensor)
    loss.backward()
    result = {"out": out, "h": h, "loss": loss, "grad.x": xt.grad,
              **{f"grad.{k}": v.grad for k, v in st.items()},
              **{f"state.{k}": v for k, v in init.items()},
              **{f"pgrad.{k}": p.grad for k, p in model.named_parameters()}}
    if c is not None:
        result["c"] = c
    return {k: v.detach().numpy() if hasattr(v, "detach") else v for k, v in result.items()}


def graphc_model(name, state):
    kind, kw, _, _ = CONFIGS[name]
    model = LAYERS[kind](IN, HID, **kw).double()
    model.load_state_dict({k[len("state."):]: np.array(v) for k, v in state.items() if k.startswith("state.")})
    return model


def _call(model, kind, x, states):
    if kind == "LSTM":
        out, (h, c) = model(x, (states["h0"], states["c0"]) if states else None)
        return out, h, c
    out, h = model(x, states.get("h0"))
    return out, h, None


def close(got, want, tol=TOL, what=""):
    got = got.numpy() if hasattr(got, "numpy") else np.asarray(got)
    assert got.shape == want.shape, what
    diff = float(np.abs(got - want).max()) if got.size else 0.0
    assert diff <= tol, f"{what}: max difference {diff}"
    return diff


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_layer_matches_torch_eager_and_compiled(name, torch_ref):
    kind = CONFIGS[name][0]
    x, states, weights = _inputs(name)
    ref = torch_ref([name, x, states, weights], lambda: torch_layer(name, x, states, weights))
    model = graphc_model(name, ref)
    assert list(model.state_dict()) == [k[len("state."):] for k in ref if k.startswith("state.")]
    # eager: outputs and gradients of the input, the initial states and every parameter
    xg = gc.tensor(x, requires_grad=True)
    sg = {k: gc.tensor(v, requires_grad=True) for k, v in states.items()}
    out, h, c = _call(model, kind, xg, sg)
    close(out, ref["out"], what="output")
    close(h, ref["h"], what="h_n")
    if c is not None:
        close(c, ref["c"], what="c_n")
    loss = _loss(out, h, c, weights, gc.tensor)
    close(loss, ref["loss"], what="loss")
    loss.backward()
    close(xg.grad, ref["grad.x"], what="grad x")
    for k, v in sg.items():
        close(v.grad, ref[f"grad.{k}"], what=f"grad {k}")
    for k, p in model.named_parameters():
        close(p.grad, ref[f"pgrad.{k}"], what=f"grad {k}")
    # compiled forward: one plan, one scan per layer and direction
    model.zero_grad()
    names, kw = list(states), CONFIGS[name][1]

    def forward(x, *s):
        out, h, c = _call(model, kind, x, dict(zip(names, s)))
        return (out, h) if c is None else (out, h, c)
    # the batch N and the time T declared where they are (states hold N on dim 1)
    dims = None
    if CONFIGS[name][2]:
        dims = {0: {0: "N", 1: "T"} if kw.get("batch_first") else {0: "T", 1: "N"},
                **{i + 1: {1: "N"} for i in range(len(states))}}
    plan = gc.compile(forward, (x, *states.values()), dynamic_dims=dims)
    got = plan(x, *states.values())
    close(got[0], ref["out"], what="compiled output")
    close(got[1], ref["h"], what="compiled h_n")
    if c is not None:
        close(got[2], ref["c"], what="compiled c_n")
    scans = [n for n in plan.graph.nodes if n.op == "scan"]
    assert len(scans) == kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    for node in scans:  # the input projection is outside: the body's linears are W_hh's (and W_hr's)
        assert [n.op for n in node.attrs["body"].nodes].count("linear") == (2 if kw.get("proj_size") else 1)
    reverse = [n.attrs["reverse"] for n in scans]
    assert reverse.count(True) == (kw.get("num_layers", 1) if kw.get("bidirectional") else 0)


def test_module_compiles_directly_and_nested_lstm_output_is_reported():
    """gc.compile(model, (x,)) of an RNN/GRU: the output pair is the plan's outputs."""
    gc.manual_seed(0)
    model = GRU(IN, HID, num_layers=2).double().eval()
    x = np.random.default_rng(3).standard_normal((T, N, IN))
    plan = gc.compile(model, (x,))
    out, h = plan(x)
    want_out, want_h = model(gc.tensor(x))
    close(out, want_out.numpy(), 1e-12)
    close(h, want_h.numpy(), 1e-12)


# ---- training: a PyTorch-idiom step function, compiled, against torch's SGD -------------------------
TRAIN = {
    "lstm_2layers_bidirectional": ("LSTM", {"num_layers": 2, "bidirectional": True}),
    "gru_batch_first": ("GRU", {"batch_first": True}),
    "rnn_relu_2layers": ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
}
LR, STEPS = 0.1, 3


LENGTHS = (6, 4, 9)  # one training plan, a different sequence length at every step


def _batches(name):
    kind, kw = TRAIN[name]
    rng = np.random.default_rng(len(name))
    dirs = 2 if kw.get("bidirectional") else 1
    batches = []
    for t in LENGTHS:
        x_shape = (N, t, IN) if kw.get("batch_first") else (t, N, IN)
        batches.append((rng.standard_normal(x_shape), rng.standard_normal(x_shape[:-1] + (dirs * HID,))))
    return batches


def torch_training(name, batches):
    import torch

    kind, kw = TRAIN[name]
    torch.manual_seed(1)
    model = getattr(torch.nn, kind)(IN, HID, **kw).double()
    init = {f"init.{k}": v.detach().numpy().copy() for k, v in model.state_dict().items()}
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        out = model(torch.from_numpy(x))[0]
        loss = ((out - torch.from_numpy(y)) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": np.array(losses), **init,
            **{f"final.{k}": v.detach().numpy() for k, v in model.state_dict().items()}}


@pytest.mark.parametrize("name", sorted(TRAIN))
def test_compiled_training_steps_match_torch_sgd(name, torch_ref):
    kind, kw = TRAIN[name]
    batches = _batches(name)
    ref = torch_ref([name, batches], lambda: torch_training(name, batches))
    model = LAYERS[kind](IN, HID, **kw).double()
    model.load_state_dict({k[len("init."):]: np.array(v) for k, v in ref.items() if k.startswith("init.")})
    opt = gc.optim.SGD(model.parameters(), lr=LR)

    def train_step(x, y):
        opt.zero_grad()
        out = model(x)[0]
        loss = ((out - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    dims = {"x": {1: "T"}, "y": {1: "T"}} if kw.get("batch_first") else {"x": {0: "T", 1: "N"}, "y": {0: "T", 1: "N"}}
    step = gc.compile(train_step, batches[0], dynamic_dims=dims)
    dirs = 2 if kw.get("bidirectional") else 1
    assert sum(n.op == "scan" for n in step.graph.nodes) == 2 * kw.get("num_layers", 1) * dirs  # forward + backward
    losses = [float(np.asarray(step(x, y))) for x, y in batches]
    np.testing.assert_allclose(losses, ref["losses"], rtol=0, atol=1e-12)
    for k, v in model.state_dict().items():
        close(v, ref[f"final.{k}"], 1e-12, what=k)
        assert np.abs(ref[f"final.{k}"] - ref[f"init.{k}"]).max() > 1e-4  # every parameter learned


# ---- one plan, several sequence lengths; save and load ---------------------------------------------
@pytest.mark.parametrize("kind,kw,dims", [
    ("LSTM", {"num_layers": 2, "bidirectional": True}, {"x": {0: "T", 1: "N"}}),
    ("GRU", {"batch_first": True, "bidirectional": True}, {"x": {1: "T"}}),
    ("RNN", {"num_layers": 2}, {"x": {0: "T", 1: "N"}}),
])
def test_one_plan_runs_every_sequence_length_and_saves(kind, kw, dims, tmp_path):
    gc.manual_seed(2)
    model = LAYERS[kind](IN, HID, **kw).eval()
    rng = np.random.default_rng(5)
    batch_first = kw.get("batch_first", False)

    def sample(t, n):
        return rng.standard_normal((n, t, IN) if batch_first else (t, n, IN)).astype(np.float32)

    def forward(x):
        out, h = model(x)
        return (out, *h) if kind == "LSTM" else (out, h)
    plan = gc.compile(forward, (sample(5, 3),), dynamic_dims=dims)
    assert str(plan.graph.inputs[0].type) == ("f32[N,T,4]" if batch_first else "f32[T,N,4]")
    dirs = 2 if kw.get("bidirectional") else 1
    assert sum(n.op == "scan" for n in plan.graph.nodes) == kw.get("num_layers", 1) * dirs
    # float32, the same ops in the same order as eager: rounding apart
    for t, n in ((5, 3), (9, 2), (2, 3)):
        x = sample(t, n)
        for got, want in zip(plan(x), forward(gc.tensor(x))):
            close(got, want.numpy(), 1e-5)
    plan.save(tmp_path / "rnn.graphc")
    loaded = gc.load(tmp_path / "rnn.graphc")
    x = sample(7, 3)
    for got, want in zip(loaded(x), forward(gc.tensor(x))):
        close(got, want.numpy(), 1e-5)


# ---- cells -----------------------------------------------------------------------------------------
CELL_CONFIGS = {
    "rnn_cell": ("RNNCell", {}, True, True),
    "rnn_cell_relu_no_state": ("RNNCell", {"nonlinearity": "relu"}, True, False),
    "lstm_cell": ("LSTMCell", {}, True, True),
    "lstm_cell_no_state": ("LSTMCell", {}, True, False),
    "gru_cell": ("GRUCell", {}, True, True),
    "gru_cell_unbatched": ("GRUCell", {}, False, True),
    "lstm_cell_unbatched_no_bias": ("LSTMCell", {"bias": False}, False, True),
}


def _cell_inputs(name):
    kind, _, batched, given = CELL_CONFIGS[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    lead = (N,) if batched else ()
    x = rng.standard_normal(lead + (IN,))
    states = [rng.standard_normal(lead + (HID,)) for _ in range(2 if kind == "LSTMCell" else 1)] if given else []
    weights = [rng.standard_normal(lead + (HID,)) for _ in range(2 if kind == "LSTMCell" else 1)]
    return x, states, weights


def torch_cell(name, x, states, weights):
    import torch

    kind, kw, _, _ = CELL_CONFIGS[name]
    torch.manual_seed(0)
    cell = getattr(torch.nn, kind)(IN, HID, **kw).double()
    init = {f"state.{k}": v.detach().numpy().copy() for k, v in cell.state_dict().items()}
    xt = torch.tensor(x, requires_grad=True)
    st = [torch.tensor(s, requires_grad=True) for s in states]
    outs = cell(xt, (tuple(st) if kind == "LSTMCell" else st[0]) if st else None)
    outs = outs if isinstance(outs, tuple) else (outs,)
    sum(((o * torch.tensor(w)).sum() for o, w in zip(outs, weights))).backward()
    return {**init, **{f"out{i}": o.detach().numpy() for i, o in enumerate(outs)}, "grad.x": xt.grad.numpy(),
            **{f"grad.s{i}": s.grad.numpy() for i, s in enumerate(st)},
            **{f"pgrad.{k}": p.grad.numpy() for k, p in cell.named_parameters()}}


@pytest.mark.parametrize("name", sorted(CELL_CONFIGS))
def test_cell_matches_torch(name, torch_ref):
    kind, kw, _, _ = CELL_CONFIGS[name]
    x, states, weights = _cell_inputs(name)
    ref = torch_ref([name, x, states, weights], lambda: torch_cell(name, x, states, weights))
    cell = CELLS[kind](IN, HID, **kw).double()
    tsd = {k[len("state."):]: np.array(v) for k, v in ref.items() if k.startswith("state.")}
    assert list(cell.state_dict()) == list(tsd)
    cell.load_state_dict(tsd)
    xg = gc.tensor(x, requires_grad=True)
    sg = [gc.tensor(s, requires_grad=True) for s in states]
    outs = cell(xg, (tuple(sg) if kind == "LSTMCell" else sg[0]) if sg else None)
    outs = outs if isinstance(outs, tuple) else (outs,)
    for i, o in enumerate(outs):
        close(o, ref[f"out{i}"], what=f"output {i}")
    sum((o * gc.tensor(w)).sum() for o, w in zip(outs, weights)).backward()
    close(xg.grad, ref["grad.x"], what="grad x")
    for i, s in enumerate(sg):
        close(s.grad, ref[f"grad.s{i}"], what=f"grad state {i}")
    for k, p in cell.named_parameters():
        close(p.grad, ref[f"pgrad.{k}"], what=f"grad {k}")
    if not CELL_CONFIGS[name][2]:
        return  # a 1-D input's only dim would be read as the symbolic batch: see test_unbatched_cell_compiled
    # compiled: the same numbers
    plan = gc.compile(lambda x, *s: cell(x, (tuple(s) if kind == "LSTMCell" else s[0]) if s else None),
                      (x, *states))
    got = plan(x, *states)
    got = got if isinstance(got, (tuple, list)) else (got,)
    for i, o in enumerate(got):
        close(o, ref[f"out{i}"], what=f"compiled output {i}")


# ---- construction, names, init, dropout, errors (no torch needed) -----------------------------------
def test_parameter_names_shapes_and_init_bounds():
    gc.manual_seed(0)
    lstm = LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2)
    shapes = {k: tuple(v.shape) for k, v in lstm.state_dict().items()}
    assert shapes == {
        "weight_ih_l0": (16, 3), "weight_hh_l0": (16, 2), "bias_ih_l0": (16,), "bias_hh_l0": (16,),
        "weight_hr_l0": (2, 4),
        "weight_ih_l0_reverse": (16, 3), "weight_hh_l0_reverse": (16, 2), "bias_ih_l0_reverse": (16,),
        "bias_hh_l0_reverse": (16,), "weight_hr_l0_reverse": (2, 4),
        "weight_ih_l1": (16, 4), "weight_hh_l1": (16, 2), "bias_ih_l1": (16,), "bias_hh_l1": (16,),
        "weight_hr_l1": (2, 4),
        "weight_ih_l1_reverse": (16, 4), "weight_hh_l1_reverse": (16, 2), "bias_ih_l1_reverse": (16,),
        "bias_hh_l1_reverse": (16,), "weight_hr_l1_reverse": (2, 4)}
    assert list(lstm.state_dict())[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"]
    big = GRU(8, 100)
    for v in big.state_dict().values():
        assert v.dtype == np.float32 and np.abs(v).max() <= 0.1 and np.abs(v).max() > 0.09
    assert list(GRU(2, 3, bias=False).state_dict()) == ["weight_ih_l0", "weight_hh_l0"]
    assert list(RNNCell(2, 3).state_dict()) == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    assert tuple(GRUCell(2, 3).weight_ih.shape) == (9, 2) and tuple(LSTMCell(2, 3).weight_hh.shape) == (12, 3)
    gc.manual_seed(7)
    a = RNN(3, 4).state_dict()["weight_hh_l0"].copy()
    gc.manual_seed(7)
    assert np.array_equal(a, RNN(3, 4).state_dict()["weight_hh_l0"])  # seeded
    assert lstm.flatten_parameters() is None


def test_dropout_between_layers_only_in_training():
    gc.manual_seed(0)
    model = GRU(IN, HID, num_layers=2, dropout=0.5)
    plain = GRU(IN, HID, num_layers=2)
    plain.load_state_dict(model.state_dict())
    x = gc.tensor(np.random.default_rng(0).standard_normal((T, N, IN)).astype(np.float32))
    trained = model(x)[0].numpy()
    assert not np.allclose(trained, plain(x)[0].numpy())
    np.testing.assert_array_equal(model.eval()(x)[0].numpy(), plain(x)[0].numpy())
    single = GRU(IN, HID, dropout=0.5)  # one layer: nothing between layers, dropout has no effect
    twin = GRU(IN, HID)
    twin.load_state_dict(single.state_dict())
    np.testing.assert_array_equal(single(x)[0].numpy(), twin(x)[0].numpy())


def test_errors_are_graphc_errors():
    with pytest.raises(gc.GraphcError, match="proj_size argument is only supported for LSTM"):
        GRU(3, 4, proj_size=2)
    with pytest.raises(gc.GraphcError, match="proj_size has to be smaller than hidden_size"):
        LSTM(3, 4, proj_size=4)
    with pytest.raises(gc.GraphcError, match="Unknown nonlinearity"):
        RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(gc.GraphcError, match="dropout"):
        LSTM(3, 4, dropout=1.5)
    with pytest.raises(gc.GraphcError, match="input_size"):
        LSTM(3, 4)(gc.zeros(5, 2, 7))
    with pytest.raises(gc.GraphcError, match="h_0"):
        GRU(3, 4, num_layers=2)(gc.zeros(5, 2, 3), gc.zeros(1, 2, 4))
    with pytest.raises(gc.GraphcError, match=r"\(h_0, c_0\)"):
        LSTM(3, 4)(gc.zeros(5, 2, 3), gc.zeros(1, 2, 4))
    with pytest.raises(gc.GraphcError, match="dims"):
        RNN(3, 4)(gc.zeros(3))


def test_dtype_factory_argument():
    assert all(v.dtype == np.float64 for v in LSTM(3, 4, dtype=gc.float64).state_dict().values())
    assert all(v.dtype == np.float64 for v in GRUCell(3, 4, dtype=gc.float64).state_dict().values())


def test_compiled_training_with_dropout_between_layers():
    """Dropout draws from the plan's RNG in the training plan; the eval plan has no dropout."""
    gc.manual_seed(3)
    model = LSTM(IN, HID, num_layers=2, dropout=0.4)
    opt = gc.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((T, N, IN)).astype(np.float32)

    def train_step(x):
        opt.zero_grad()
        loss = model(x)[0].pow(2).mean()
        loss.backward()
        opt.step()
        return loss
    step = gc.compile(train_step, (x,))
    assert sum(n.op == "dropout" for n in step.graph.nodes) == 1  # between the two layers only
    before = model.state_dict()["weight_ih_l0"].copy()
    losses = [float(np.asarray(step(x))) for _ in range(2)]
    assert all(np.isfinite(losses)) and not np.array_equal(before, model.state_dict()["weight_ih_l0"])
    model.eval()
    infer = gc.compile(lambda x: model(x)[0], (x,))
    assert not any(n.op == "dropout" for n in infer.graph.nodes)
    np.testing.assert_allclose(infer(x), model(gc.tensor(x))[0].numpy(), rtol=1e-6, atol=1e-6)
