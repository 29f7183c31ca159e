"""The fused recurrent cells (``lstm_cell`` / ``gru_cell`` and their ``*_grad`` ops,
ir/ops/recurrent_cell.py): what ``lstm_step`` / ``gru_step`` emit, so the compiled layers' scan
bodies hold one cell node (and their backward bodies one grad node) per step, with the numbers
of the unfused composite they replaced (kept below as the reference), eagerly and compiled,
and in ONNX. The ops' own forward, gradient and PyTorch rows are in the op table
(tests/op_table_recurrent.py)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F
from graphc import nn, optim
from graphc.nn import recurrent, recurrent_cells

HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None


# ---- the composite the fused ops replaced --------------------------------------------------

def composite_lstm_step(gi, state, w_hh, b_hh, w_hr=None):
    h, c = state
    gates = gi + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def composite_gru_step(gi, h, w_hh, b_hh):
    gh = F.linear(h, w_hh, b_hh)
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = gh.chunk(3, -1)
    r = (i_r + h_r).sigmoid()
    z = (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    return (1 - z) * n + z * h


@pytest.fixture
def composite(monkeypatch):
    """Run the block under the composite steps (both the layers' and the cells' references)."""
    def use():
        for module in (recurrent, recurrent_cells):
            monkeypatch.setattr(module, "lstm_step", composite_lstm_step)
            monkeypatch.setattr(module, "gru_step", composite_gru_step)
    return use


MODELS = {
    "lstm": lambda: nn.LSTM(5, 6, num_layers=2),
    "lstm-proj": lambda: nn.LSTM(5, 6, proj_size=3, bidirectional=True),
    "gru": lambda: nn.GRU(5, 6, num_layers=2, bidirectional=True),
    "lstm-cell": lambda: nn.LSTMCell(5, 6),
    "gru-cell": lambda: nn.GRUCell(5, 6),
}


def _model(kind):
    gc.manual_seed(3)
    return MODELS[kind]()


def _input(kind):
    shape = (4, 5) if kind.endswith("cell") else (7, 4, 5)
    return np.random.default_rng(4).standard_normal(shape).astype(np.float32)


def _output(kind, out):
    """One tensor from the model's output (sum of its parts, so every output is used)."""
    if kind == "lstm-cell":
        return out[0] * 2 + out[1]
    if kind == "gru-cell":
        return out
    y, state = out
    extra = sum(s.sum() for s in state) if isinstance(state, tuple) else state.sum()
    return y.sum() + extra * 0.5


def _train(kind, x):
    model = _model(kind)
    opt = optim.SGD(model.parameters(), lr=0.1)

    def train_step(x):
        opt.zero_grad()
        loss = (_output(kind, model(x)) ** 2).sum() if kind.endswith("cell") else _output(kind, model(x))
        loss.backward()
        opt.step()
        return loss
    step = gc.compile(train_step, (x,))
    losses = [float(step(x)) for _ in range(2)]
    return step, losses, {k: np.asarray(v) for k, v in model.state_dict().items()}


def _bodies(graph):
    """Every nested body's op names, recursively."""
    out = []
    for node in graph.nodes:
        for body in (v for v in node.attrs.values() if hasattr(v, "nodes")):
            out.append([n.op for n in body.nodes])
            out.extend(_bodies(body))
    return out


@pytest.mark.parametrize("kind, cell", [("lstm", "lstm_cell"), ("gru", "gru_cell"), ("lstm-proj", "lstm_cell")])
def test_compiled_scan_bodies_hold_the_fused_cells_and_match_the_composite(composite, kind, cell):
    x = _input(kind)
    step, losses, params = _train(kind, x)
    bodies = _bodies(step.graph)
    forward = [b for b in bodies if cell in b and f"{cell}_grad" not in b]
    backward = [b for b in bodies if f"{cell}_grad" in b]
    assert forward and backward, bodies
    assert all("sigmoid" not in b and "tanh" not in b and "slice" not in b for b in forward + backward)
    assert len(forward[0]) <= 4, forward[0]  # linear, add, the cell (and the projection)
    composite()
    plain, plain_losses, plain_params = _train(kind, x)
    assert not any(cell in b for b in _bodies(plain.graph))
    np.testing.assert_allclose(losses, plain_losses, rtol=1e-5)
    for k, v in params.items():
        np.testing.assert_allclose(v, plain_params[k], rtol=1e-5, atol=1e-6, err_msg=k)


def _eager(kind):
    model = _model(kind)
    x = gc.tensor(_input(kind), requires_grad=True)
    out = _output(kind, model(x))
    (out * out).sum().backward()
    grads = {name: np.asarray(p.grad) for name, p in model.named_parameters()}
    return np.asarray(out), np.asarray(x.grad), grads


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_eager_values_and_gradients_match_the_composite(composite, kind):
    """Eager tensors run the same kernels (dispatch -> run_node) and the same vjp (the tape)."""
    out, dx, grads = _eager(kind)
    composite()
    ref_out, ref_dx, ref_grads = _eager(kind)
    for name, got, want in [("out", out, ref_out), ("x.grad", dx, ref_dx)] + [(k, v, ref_grads[k]) for k, v in grads.items()]:
        # float32 rounding of sums over time steps: relative to the array's scale
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * max(1.0, float(np.abs(want).max())), err_msg=name)


def test_cell_keeps_a_symbolic_batch_dim():
    x = _input("lstm")
    plan = gc.compile(_model("lstm").eval(), (x,), dynamic_dims={0: {1: "N"}})
    line = next(s for s in str(plan.graph).splitlines() if "= lstm_cell" in s)
    assert "[N,6]" in line and "[N,30]" in line, line  # h, c_new and the (N, 5H) workspace
    small = x[:, :2]
    np.testing.assert_allclose(np.asarray(plan(small)[0]), np.asarray(plan(x)[0])[:, :2], rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed")
@pytest.mark.parametrize("kind", ["lstm", "gru", "lstm-cell", "gru-cell"])
def test_onnx_export_writes_the_cells_as_standard_ops(tmp_path, kind):
    import onnx
    import onnxruntime as ort

    model, x = _model(kind).eval(), _input(kind)
    path = tmp_path / "cell.onnx"
    gc.export(model, (x,), str(path))
    proto = onnx.load(str(path))
    ops = {n.op_type for n in proto.graph.node}
    for n in proto.graph.node:
        for a in n.attribute:
            if a.g is not None:
                ops |= {m.op_type for m in a.g.node}
    assert {"Split", "Sigmoid", "Tanh", "Mul", "Add"} <= ops, ops
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x})
    want = model(gc.from_numpy(x))
    want = [want] if isinstance(want, gc.Tensor) else [want[0]] + (list(want[1]) if kind == "lstm" else [want[1]])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-5)
