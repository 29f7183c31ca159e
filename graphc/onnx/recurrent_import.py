"""ONNX import of the recurrent ops ``RNN``, ``GRU`` and ``LSTM`` (opsets 7-22 forms).

Each node becomes graphc IR the way graphc's own ``nn.LSTM`` traces (graphc/nn/recurrent.py):
the input projection of every time step is one ``linear`` over the whole sequence, outside any
loop, and each direction is ONE ``scan`` over time whose body holds only the recurrent step
(``h @ R^T``, the gates, the activations). So the plan's size does not grow with the sequence
length, and a sequence length the model declares dynamic stays a symbol.

What ONNX specifies and is read here: ``direction`` (forward, reverse, bidirectional: a
reverse scan keeps its outputs at their inputs' time positions, as ONNX's ``Y`` does),
``layout`` 0 (time-major) and 1 (batch-major), ``activations`` with ``activation_alpha`` /
``activation_beta`` (every function ONNX lists), ``clip`` (applied to the gates' inputs, before
their activations, as onnxruntime does), GRU's ``linear_before_reset``, LSTM's
``input_forget`` (the forget gate is ``1 - input gate``) and peepholes ``P``, the optional
``B``, ``initial_h``, ``initial_c`` and ``sequence_lens``, and any subset of the outputs.

``sequence_lens``: the step at time ``t`` updates batch entry ``b`` only while
``t < sequence_lens[b]`` (a carried step counter, compared in the body), and ``Y`` is zero past
each sequence's end. A reverse direction scans backwards over the padding first, keeping the
initial state there, so each sequence is read from its own last element, as onnxruntime does.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Value
from ..ir.ops.control import step_type
from ..ir.types import DType, TensorType
from .control_import import BodyReader, join
from .elementwise_readers import scalar
from .shape_readers import _known, _shape

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
# ONNX's activation functions: name -> (default alpha, default beta); None where it takes none
ACTIVATIONS = {"relu": (None, None), "tanh": (None, None), "sigmoid": (None, None), "softsign": (None, None),
               "softplus": (None, None), "affine": (1.0, 0.0), "leakyrelu": (0.01, None),
               "thresholdedrelu": (1.0, None), "scaledtanh": (1.0, 1.0), "hardsigmoid": (0.2, 0.5),
               "elu": (1.0, None)}
_I64 = TensorType((), DType.int64)


# ---- attributes ---------------------------------------------------------------------------------
def _activations(r, op: str, attrs: dict, directions: int) -> list:
    """Per direction, the list of ``(name, alpha, beta)`` (lowercased names). Alphas and betas
    are consumed in order by the functions that take them (onnxruntime's reading)."""
    names = [n.decode() if isinstance(n, bytes) else str(n)
             for n in attrs.get("activations", DEFAULT_ACTIVATIONS[op] * directions)]
    per = len(DEFAULT_ACTIVATIONS[op])
    if len(names) == per and directions == 2:  # one list for both directions
        names = names * 2
    if len(names) != per * directions:
        raise r.error(f"{op} with {len(names)} activations; it takes {per} per direction ({per * directions})")
    alphas, betas = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta", []))
    out = []
    for name in names:
        key = name.lower()
        if key not in ACTIVATIONS:
            raise r.error(f"{op} activation {name!r} is not an ONNX activation function graphc imports "
                          f"({', '.join(sorted(ACTIVATIONS))})")
        alpha, beta = ACTIVATIONS[key]
        if alpha is not None and alphas:
            alpha = float(alphas.pop(0))
        if beta is not None and betas:
            beta = float(betas.pop(0))
        out.append((key, alpha, beta))
    return [out[d * per:(d + 1) * per] for d in range(directions)]


def _read_attrs(r, op: str) -> dict:
    attrs = r.attrs()
    direction = attrs.get("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise r.error(f"{op} with direction={direction!r}; ONNX's are forward, reverse and bidirectional")
    layout = int(attrs.get("layout", 0))
    if layout not in (0, 1):
        raise r.error(f"{op} with layout={layout}; ONNX's are 0 (time-major) and 1 (batch-major)")
    directions = 2 if direction == "bidirectional" else 1
    clip = attrs.get("clip")
    if clip is not None and not float(clip) > 0:
        raise r.error(f"{op} with clip={clip}; the threshold must be positive")
    return {"hidden": int(attrs["hidden_size"]), "reverse": [direction == "reverse", True][:directions],
            "layout": layout, "clip": None if clip is None else float(clip),
            "activations": _activations(r, op, attrs, directions),
            "lbr": bool(attrs.get("linear_before_reset", 0)), "input_forget": bool(attrs.get("input_forget", 0))}


# ---- pieces of known arrays or graph values -----------------------------------------------------
def _cut(r, x, dim: int, start, stop, drop: bool = False):
    """``x`` sliced along ``dim`` (``x[..., start:stop]``); with ``drop``, ``x[..., start]``."""
    if _known(x):
        index = [slice(None)] * np.ndim(x)
        index[dim] = start if drop else slice(start, stop)
        return np.ascontiguousarray(np.asarray(x)[tuple(index)])
    slices = [[None, None, 1] for _ in _shape(x)]
    slices[dim] = [start, stop, 1]
    return r.emit("slice", [x], {"slices": slices, "drop": [dim] if drop else []})


def _reshape(r, x, shape: list):
    return np.reshape(x, shape) if _known(x) else r.emit("reshape", [x], {"shape": list(shape)})


def _permute(r, x, perm: list):
    return np.transpose(x, perm) if _known(x) else r.emit("permute", [x], {"perm": list(perm)})


def _concat(r, parts: list, dim: int):
    return parts[0] if len(parts) == 1 else r.emit("concat", parts, {"dim": dim})


# ---- activations and the steps ------------------------------------------------------------------
def activate(b, act: tuple, x) -> Value:
    """ONNX's activation function ``act`` = (name, alpha, beta) applied to ``x`` in body ``b``."""
    name, alpha, beta = act
    if name in ("relu", "tanh", "sigmoid"):
        return b.emit(name, [x])
    if name == "affine":
        return b.emit("add", [b.emit("mul", [x, scalar(b, x, alpha)]), scalar(b, x, beta)])
    if name == "leakyrelu":
        return b.emit("leaky_relu", [x], {"negative_slope": alpha})
    if name == "thresholdedrelu":
        return b.emit("where", [b.emit("gt", [x, scalar(b, x, alpha)]), x, scalar(b, x, 0.0)])
    if name == "scaledtanh":
        return b.emit("mul", [b.emit("tanh", [b.emit("mul", [x, scalar(b, x, beta)])]), scalar(b, x, alpha)])
    if name == "hardsigmoid":
        scaled = b.emit("add", [b.emit("mul", [x, scalar(b, x, alpha)]), scalar(b, x, beta)])
        return b.emit("hardtanh", [scaled], {"min_val": 0.0, "max_val": 1.0})
    if name == "elu":
        below = b.emit("mul", [b.emit("sub", [b.emit("exp", [x]), scalar(b, x, 1.0)]), scalar(b, x, alpha)])
        return b.emit("where", [b.emit("ge", [x, scalar(b, x, 0.0)]), x, below])
    if name == "softsign":
        return b.emit("div", [x, b.emit("add", [b.emit("abs", [x]), scalar(b, x, 1.0)])])
    # softplus, without overflow: relu(x) + log1p(exp(-|x|))
    tail = b.emit("log1p", [b.emit("exp", [b.emit("neg", [b.emit("abs", [x])])])])
    return b.emit("add", [b.emit("relu", [x]), tail])


def _clipped(b, x, clip):
    return x if clip is None else b.emit("hardtanh", [x], {"min_val": -clip, "max_val": clip})


def _gate(b, x, act, clip) -> Value:
    return activate(b, act, _clipped(b, x, clip))


def _recurrent(b, h, weight, bias) -> Value:
    return b.emit("linear", [h, weight] + ([] if bias is None else [bias]))


def rnn_step(b, cfg: dict, w: dict, xw, states: list) -> list:
    """``H = f(x W^T + Wb + H R^T + Rb)``."""
    h, = states
    pre = b.emit("add", [xw, _recurrent(b, h, w["R"], w["Rb"])])
    return [_gate(b, pre, cfg["acts"][0], cfg["clip"])]


def gru_step(b, cfg: dict, w: dict, xw, states: list) -> list:
    """Gates z, r, h (ONNX's order); ``linear_before_reset`` applies ``R_h`` before the reset gate."""
    h, = states
    size = cfg["hidden"]
    f, g = cfg["acts"]
    x_zr, x_h = _cut(b, xw, 1, 0, 2 * size), _cut(b, xw, 1, 2 * size, 3 * size)
    if cfg["lbr"]:
        rh = _recurrent(b, h, w["R"], w["Rb"])
        h_zr, h_h = _cut(b, rh, 1, 0, 2 * size), _cut(b, rh, 1, 2 * size, 3 * size)
    else:
        h_zr = _recurrent(b, h, w["R_zr"], w["Rb_zr"])
    zr = b.emit("add", [x_zr, h_zr])
    z, r = (_gate(b, _cut(b, zr, 1, k * size, (k + 1) * size), f, cfg["clip"]) for k in (0, 1))
    if cfg["lbr"]:
        inner = b.emit("mul", [r, h_h])
    else:
        inner = _recurrent(b, b.emit("mul", [r, h]), w["R_h"], w["Rb_h"])
    candidate = _gate(b, b.emit("add", [x_h, inner]), g, cfg["clip"])
    # (1 - z) * candidate + z * h, as candidate + z * (h - candidate)
    return [b.emit("add", [candidate, b.emit("mul", [z, b.emit("sub", [h, candidate])])])]


def lstm_step(b, cfg: dict, w: dict, xw, states: list) -> list:
    """Gates i, o, f, c (ONNX's order), peepholes ``P = [Pi, Po, Pf]``, ``input_forget``."""
    h, c = states
    size = cfg["hidden"]
    f, g, hact = cfg["acts"]
    gates = b.emit("add", [xw, _recurrent(b, h, w["R"], w["Rb"])])
    i_pre, o_pre, f_pre, c_pre = (_cut(b, gates, 1, k * size, (k + 1) * size) for k in range(4))
    peep = w.get("P")
    if peep is not None:
        i_pre = b.emit("add", [i_pre, b.emit("mul", [_cut(b, peep, 0, 0, size), c])])
        f_pre = b.emit("add", [f_pre, b.emit("mul", [_cut(b, peep, 0, 2 * size, 3 * size), c])])
    i = _gate(b, i_pre, f, cfg["clip"])
    forget = b.emit("sub", [scalar(b, i, 1.0), i]) if cfg["input_forget"] else _gate(b, f_pre, f, cfg["clip"])
    c_new = b.emit("add", [b.emit("mul", [forget, c]), b.emit("mul", [i, _gate(b, c_pre, g, cfg["clip"])])])
    if peep is not None:
        o_pre = b.emit("add", [o_pre, b.emit("mul", [_cut(b, peep, 0, size, 2 * size), c_new])])
    o = _gate(b, o_pre, f, cfg["clip"])
    return [b.emit("mul", [o, activate(b, hact, c_new)]), c_new]


STEPS = {"RNN": rnn_step, "GRU": gru_step, "LSTM": lstm_step}


# ---- one direction: the projection, then one scan -----------------------------------------------
def _weights(r, op: str, cfg: dict, args: list, d: int) -> tuple:
    """Direction ``d``'s input weight and bias (for the projection outside the scan) and its
    recurrent weights, split as the step needs them."""
    _, W, R, B = args[:4]
    size, gates = cfg["hidden"], GATES[op]
    w_in, r_all = _cut(r, W, 0, d, None, drop=True), _cut(r, R, 0, d, None, drop=True)
    b_in = b_rec = None
    if B is not None:
        b_dir = _cut(r, B, 0, d, None, drop=True)
        b_in, b_rec = _cut(r, b_dir, 0, 0, gates * size), _cut(r, b_dir, 0, gates * size, 2 * gates * size)
    w = {"R": r_all, "Rb": b_rec}
    if op == "GRU" and not cfg["lbr"]:  # the candidate's recurrent product reads r * h
        w.update(R_zr=_cut(r, r_all, 0, 0, 2 * size), R_h=_cut(r, r_all, 0, 2 * size, 3 * size),
                 Rb_zr=None if b_rec is None else _cut(r, b_rec, 0, 0, 2 * size),
                 Rb_h=None if b_rec is None else _cut(r, b_rec, 0, 2 * size, 3 * size))
    if op == "LSTM" and len(args) > 7 and args[7] is not None:
        w["P"] = _cut(r, args[7], 0, d, None, drop=True)
    return w_in, b_in, w


def _initial(r, state, d: int, layout: int, like: Value, size: int):
    """Direction ``d``'s initial state ``(N, H)``: from ``initial_h``/``initial_c``, else zeros."""
    if state is None:
        n = like.type.shape[1]
        return r.emit("full", [], {"shape": [n, size], "value": 0.0, "dtype": like.type.dtype.name})
    return _cut(r, state, 1 if layout else 0, d, None, drop=True)


def _first_step(r, x: Value, reverse: bool):
    """The time index the scan starts at: 0, or ``T - 1`` backwards (``T`` read at run time when
    the model declares the sequence length dynamic)."""
    length = x.type.shape[0]
    if not reverse:
        return np.zeros((), np.int64)
    if isinstance(length, int):
        return np.asarray(length - 1, np.int64)
    ones = r.emit("full", [], {"shape": [length], "value": 1.0, "dtype": "int64"})
    return r.emit("sub", [r.emit("sum", [ones], {"dims": [0], "keepdim": False}), np.ones((), np.int64)])


def _masked(b, valid, new: list, old: list, ys: list) -> tuple:
    """Past a sequence's end the state keeps its value and ``Y`` is zero."""
    states = [b.emit("where", [valid, n, o]) for n, o in zip(new, old)]
    return states, [b.emit("where", [valid, y, scalar(b, y, 0.0)]) for y in ys]


def _direction(r, op: str, cfg: dict, x: Value, states: list, w: dict, lengths, reverse: bool) -> list:
    """One ``scan`` over the projected sequence ``x`` (T, N, G*H); returns (final states, Y)."""
    body = BodyReader(r, f"{op.lower()}_{'reverse' if reverse else 'forward'}_step")
    carried = [body.bind(None, s.type) for s in states]
    counter = body.bind(None, _I64) if lengths is not None else None
    xw = body.bind(None, step_type(x.type, 0))
    taken = {k: (body.take(v) if isinstance(v, Value) else v) for k, v in w.items()}
    new = STEPS[op](body, cfg, taken, xw, carried)
    outs, ys = new, [new[0]]
    init = list(states)
    if counter is not None:
        valid = _valid(body, counter, lengths, states[0])
        outs, ys = _masked(body, valid, new, carried, ys)
        outs = [*outs, body.emit("add", [counter, np.asarray(-1 if reverse else 1, np.int64)])]
        init.append(r.value(_first_step(r, x, reverse)))
    graph = body.finish([*outs, *ys])
    operands = join([body])
    attrs = {"body": graph, "carries": len(init), "scanned": 1, "dim": 0, "reverse": bool(reverse)}
    out = r.builder.emit("scan", [*init, x, *operands], attrs, r.meta)
    return out[:len(states)], out[-1]


def _valid(b, counter, lengths, state) -> Value:
    """``(N, 1)`` booleans: whether this time step is inside each batch entry's sequence."""
    inside = b.emit("lt", [counter, b.take(lengths)])
    return b.emit("reshape", [inside], {"shape": [state.type.shape[0], 1]})


# ---- the node -----------------------------------------------------------------------------------
def _lengths(r, op: str, lengths, x: Value):
    """``sequence_lens`` as int64, or None when it is absent or every sequence is full length."""
    if lengths is None:
        return None
    if _known(lengths):
        array = np.asarray(lengths).astype(np.int64).reshape(-1)
        full = x.type.shape[0]
        if isinstance(full, int) and (np.any(array < 0) or np.any(array > full)):
            raise r.error(f"{op} with sequence_lens {array.tolist()} outside 0..{full} (the sequence length)")
        return None if isinstance(full, int) and np.all(array == full) else array
    if lengths.type.dtype is not DType.int64:
        lengths = r.emit("cast", [lengths], {"dtype": "int64"})
    return lengths


def _stack(r, parts: list, dim: int):
    """Per-direction values stacked along a new ``dim``."""
    grown = []
    for v in parts:
        shape = list(v.type.shape)
        grown.append(r.emit("reshape", [v], {"shape": shape[:dim] + [1] + shape[dim:]}))
    return _concat(r, grown, dim)


def _reader(op: str):
    def read(r, args):
        """``X (T, N, I)`` (``(N, T, I)`` with layout 1) -> ``Y, Y_h[, Y_c]``."""
        args = list(args) + [None] * (8 - len(args))
        cfg = _read_attrs(r, op)
        X = r.value(args[0])
        if X.type.rank != 3 or not X.type.dtype.is_float:
            raise r.error(f"{op} input X is {X.type}; ONNX's is a 3-D float tensor")
        x = _permute(r, X, [1, 0, 2]) if cfg["layout"] else X
        lengths = _lengths(r, op, args[4], x)
        initial = [args[5], args[6]] if op == "LSTM" else [args[5]]
        finals, ys = [], []
        for d, reverse in enumerate(cfg["reverse"]):
            w_in, b_in, w = _weights(r, op, cfg, args, d)
            projected = r.emit("linear", [x, w_in] + ([] if b_in is None else [b_in]))
            states = [r.value(_initial(r, s, d, cfg["layout"], x, cfg["hidden"])) for s in initial]
            step_cfg = {**cfg, "acts": cfg["activations"][d]}
            last, y = _direction(r, op, step_cfg, projected, states, w, lengths, reverse)
            finals.append(last)
            ys.append(y)
        y_all = _stack(r, ys, 1)  # (T, D, N, H)
        hidden = [_stack(r, [f[k] for f in finals], 0) for k in range(len(initial))]  # (D, N, H) each
        if cfg["layout"]:
            y_all = r.emit("permute", [y_all], {"perm": [2, 0, 1, 3]})
            hidden = [r.emit("permute", [v], {"perm": [1, 0, 2]}) for v in hidden]
        return [y_all, *hidden]
    read.__doc__ = f"ONNX ``{op}`` as a projection and one scan per direction (module docstring)."
    return read


RECURRENT_READERS = {op: _reader(op) for op in GATES}
