"""The op table: one :class:`OpInfo` entry per registered op (as PyTorch's OpInfo does).

``OP_INFO[op]`` holds everything the tests know about the op, written together in one place:

- ``samples``: a list of :class:`Sample` (inputs, attrs, grad flags), each with an independent
  numpy reference (or, for random ops, a property check);
- ``torch``: PyTorch's counterpart, ``fn(list of torch tensors, normalized attrs) -> tensor or
  list of tensors``, or ``no_torch``: why there is none (exactly one of the two).

tests/test_ops.py checks each sample eagerly against its reference, compiled against eager,
and against ``torch`` (live where torch is installed, else PyTorch's recorded outputs:
tests/torch_refs.py); tests/test_grads.py checks the vjp of every ``grad=True`` sample by
finite differences. References are plain numpy written from the ops' definitions (loops over
output positions for convolution and pooling), never graphc's kernels, and compute in float64.

torch stays optional: the table imports without it. ``torch`` entries reach PyTorch only when
called, through :func:`T` / :func:`TF` (e.g. ``lambda ts, a: T().matmul(*ts)``) or helpers such
as ``torch_unary("exp")``; nothing here evaluates ``torch.x`` while the table is built.

The rule: a new primitive is its OpDef block (ir/ops/), its kernel (executor/kernels/), its
surface declaration (``@torchsymbol``, graphc/) and ONE ``OpInfo`` entry in the family builder
it belongs to (this file: elementwise, reductions, shapes; op_table_nn.py: neural-network ops;
op_table_grad.py: backward and fused ops; op_table_loss.py: losses). There is no other list to
update: tests/test_ops.py refuses a registered op without an entry.

Inputs come from one seeded generator in table order, so a new or changed sample changes the
inputs of the samples built after it: re-record PyTorch's outputs, which are keyed by test id
and inputs (``python tests/record_torch_refs.py``; tests/data/torch_test_ops.npz).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

F32, F64, I64, BOOL = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.bool_)


# ---- input generators (deterministic; values chosen away from kinks and ties) ---------------

_RNG = np.random.default_rng(20240601)


def randn(*shape, dtype=F32, scale=1.0):
    return np.asarray(_RNG.standard_normal(shape) * scale).astype(dtype)


def uniform(lo, hi, *shape, dtype=F32):
    return np.asarray(_RNG.uniform(lo, hi, shape)).astype(dtype)


def nonzero(*shape, dtype=F32):
    """Normal-ish values with |x| >= 0.1 (relu, abs, sign, leaky_relu have a kink at 0)."""
    v = _RNG.standard_normal(shape)
    return np.asarray(np.where(v < 0, -1.0, 1.0) * (0.1 + np.abs(v))).astype(dtype)


def distinct(*shape, dtype=F32):
    """Pairwise distinct values on a 0.25 grid (exact in float32): max/argmax never tie."""
    n = int(np.prod(shape, dtype=np.int64))
    return ((_RNG.permutation(n) - n // 2) * 0.25).reshape(shape).astype(dtype)


def ints(lo, hi, *shape):
    return _RNG.integers(lo, hi, shape, dtype=np.int64)


def bools(*shape):
    return np.asarray(_RNG.random(shape) < 0.5)  # an array even for shape (): numpy returns a scalar


def fortran(a):
    """Same values, column-major storage: a transposed view, not C-contiguous."""
    out = np.asfortranarray(a)
    assert not out.flags.c_contiguous
    return out


def strided(a):
    """Same values as every other element of a bigger buffer along the last axis."""
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    big[..., ::2] = a
    out = big[..., ::2]
    assert not out.flags.c_contiguous
    return out


def flipped(a):
    """Same values through negative strides on the last axis."""
    out = np.ascontiguousarray(a[..., ::-1])[..., ::-1]
    assert out.strides[-1] < 0
    return out


# ---- reference helpers ----------------------------------------------------------------------

_ORDER = [BOOL, I64, F32, F64]


def promote(*arrays) -> np.dtype:
    """graphc's (and PyTorch's) promotion for tensors: bool < int64 < float32 < float64."""
    return max((np.dtype(a.dtype) for a in arrays), key=_ORDER.index)


def ew(fn, out=None):
    """Reference for an elementwise op: ``fn`` in float64 (ints stay ints), cast to the result
    dtype: the promoted input dtype, ``"float"`` (promoted, ints -> float32) or ``"bool"``."""
    def ref(ins, attrs):
        dt = promote(*ins)
        if out == "float":
            dt = dt if dt.kind == "f" else F32
        elif out == "bool":
            dt = BOOL
        args = [a.astype(F64) for a in ins] if dt.kind == "f" or promote(*ins).kind == "f" else ins
        return [np.asarray(fn(*args)).astype(dt)]
    return ref


@dataclass
class Sample:
    """One call of an op.

    ``ref(inputs, attrs) -> [array per op output]`` gives the expected outputs (values and
    dtypes). For random ops ``check(inputs, attrs, outputs)`` asserts properties instead.
    ``grad``: finite-difference checks make sense (float outputs, smooth at these points);
    gradient checks differentiate the floating-point inputs only.
    ``dynamic``: the sample compiles with a symbolic batch dim (False where the shape rule
    refuses ``N`` in that position, e.g. concat along dim 0).
    ``no_torch``: why this sample has no PyTorch parity check (empty: it has one).
    ``traced_attrs``: attrs for the compiled graph when they differ from the eager ones (shape
    attrs of backward ops say ``"N"`` there, as autodiff writes them).
    """

    inputs: list
    attrs: dict
    ref: Callable | None = None
    desc: str = ""
    grad: bool = True
    check: Callable | None = None
    dynamic: bool = True
    no_torch: str = ""
    traced_attrs: dict | None = None

    def __post_init__(self):
        assert (self.ref is None) != (self.check is None), "a sample needs exactly one of ref / check"


def S(inputs, ref, desc, attrs=None, **kw) -> Sample:
    return Sample(list(inputs), dict(attrs or {}), ref, desc, **kw)


@dataclass
class OpInfo:
    """Everything the tests know about one registered op (see the module docstring).

    ``torch(tensors, attrs)``: PyTorch's counterpart on the samples' inputs (C-contiguous
    copies as torch tensors) and the op's normalized attrs; returns a tensor or a list of
    tensors, one per op output. ``no_torch``: why the op has no PyTorch counterpart (its
    samples' checks live in the table or elsewhere). Exactly one of the two.
    """

    op: str
    samples: list[Sample]
    torch: Callable | None = None
    no_torch: str = ""
    # emitted only by autodiff and fusion, from float graphs (set by build_table): no user
    # reaches it with integer or bool inputs, so tests/test_dtypes_ops.py leaves it out
    internal: bool = False

    def __post_init__(self):
        assert (self.torch is None) == bool(self.no_torch), \
            f"{self.op}: an OpInfo needs exactly one of torch / no_torch"


# ---- PyTorch references: torch is imported when a reference runs, never at table build -------

def T():
    """The ``torch`` module, imported on first use (the table itself never needs torch)."""
    import torch

    return torch


def TF():
    """``torch.nn.functional``, imported on first use."""
    import torch.nn.functional

    return torch.nn.functional


def torch_unary(name):
    """``torch.<name>(x)``."""
    return lambda ts, a: getattr(T(), name)(ts[0])


def torch_binary(name):
    """``torch.<name>(x, y)``."""
    return lambda ts, a: getattr(T(), name)(ts[0], ts[1])


def torch_slice(ts, a):
    """slice as select / index_select per axis (torch's slicing has no negative steps)."""
    x = ts[0]
    if len(a["slices"]) != x.ndim:  # as x[a:b, c:d] on a tensor of another rank
        raise IndexError(f"{len(a['slices'])} slices for a rank-{x.ndim} tensor")
    for axis in reversed(range(x.ndim)):
        start, stop, step = a["slices"][axis]
        if axis in a["drop"]:
            x = x.select(axis, start)
        else:
            idx = list(range(x.shape[axis]))[start:stop:step]
            x = x.index_select(axis, T().tensor(idx, dtype=T().int64))
    return x


# ---- elementwise --------------------------------------------------------------------------

def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


_erf = np.vectorize(math.erf, otypes=[F64])  # Python's erf, element by element (the kernel is Cody's)


def _normal(scale=1.0):
    return lambda shape, dt: randn(*shape, dtype=dt, scale=scale)


def _between(lo, hi):
    return lambda shape, dt: uniform(lo, hi, *shape, dtype=dt)


UNARY_FLOAT = {  # op -> (reference in float64, input generator over the op's domain, PyTorch's)
    "exp": (np.exp, _normal(), torch_unary("exp")),
    "log": (np.log, _between(0.1, 3.0), torch_unary("log")),
    "log1p": (np.log1p, _between(-0.5, 3.0), torch_unary("log1p")),
    "sqrt": (np.sqrt, _between(0.1, 3.0), torch_unary("sqrt")),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), _between(0.1, 3.0), torch_unary("rsqrt")),
    "tanh": (np.tanh, _normal(2.0), torch_unary("tanh")),
    "sigmoid": (_sigmoid, _normal(3.0), torch_unary("sigmoid")),
    "erf": (_erf, _normal(2.0), torch_unary("erf")),
}


def _unary_samples(fn, gen, extra=()):
    ref = ew(fn)
    return [
        S([gen((3, 4), F32)], ref, "f32"),
        S([gen((2, 3, 2), F64)], ref, "f64"),
        S([fortran(gen((4, 3), F32))], ref, "noncontig-transposed"),
        S([strided(gen((2, 5), F64))], ref, "noncontig-strided-f64"),
        S([gen((1, 5), F32)], ref, "batch1"),
        S([gen((), F32)], ref, "scalar"),
        *extra,
    ]


def _unary_table():
    t = {op: OpInfo(op, _unary_samples(fn, gen), torch) for op, (fn, gen, torch) in UNARY_FLOAT.items()}
    sig = np.array([-40.0, -15.0, -1.0, 0.5, 15.0, 40.0], F32)
    t["sigmoid"].samples.append(S([sig], ew(_sigmoid), "large-magnitude"))
    t["exp"].samples.append(S([np.array([-80.0, -3.0, 0.0, 3.0, 80.0])], ew(np.exp), "wide-range-f64"))
    # erf's kernel switches formula at |x| = 0.46875 and 4 (Cody's three ranges): both sides of each.
    # (inf and NaN: tests/test_nn_modules_torch.py; here they would spoil the torch_ref fingerprint)
    erf_points = np.array([-27.0, -6.0, -4.0001, -4.0, -0.46876, -0.46875, -1e-30, 0.0, 1e-8, 0.46875, 0.46876,
                           3.9999, 4.0, 5.9, 6.5])
    t["erf"].samples.append(S([erf_points], ew(_erf), "range-edges-f64", grad=False))
    nz = lambda shape, dt: nonzero(*shape, dtype=dt)  # noqa: E731  (no kinks at exactly 0)
    for op, fn in {"neg": np.negative, "abs": np.abs, "relu": lambda x: np.maximum(x, 0.0),
                   "sign": np.sign}.items():
        samples = _unary_samples(fn, nz, [S([ints(-5, 6, 3, 4)], ew(fn), "int64", grad=False)])
        t[op] = OpInfo(op, samples, torch_unary(op))  # torch.neg, torch.abs, ...: namesakes
    t.update(_rounding_table())
    t.update(_trig_table())
    return list(t.values())


def _trig_table() -> dict:
    """sin, cos: inputs from their own generator (the table's draws, and so every other
    sample, stay as they were), over several periods, both signs."""
    rng = np.random.default_rng(7)

    def gen(shape, dt):
        return rng.uniform(-7.0, 7.0, shape).astype(dt)
    return {op: OpInfo(op, _unary_samples(fn, gen), torch_unary(op)) for op, fn in (("sin", np.sin), ("cos", np.cos))}


def _rounding_table() -> dict:
    """floor, ceil, round, trunc: literal inputs (no draws from the table's generator, so no
    other sample changes), a step from the nearest integer and from the halves, so finite
    differences see the zero gradient; ties and integers checked without gradients."""
    grid = np.array([[-2.7, -1.3, -0.6, -0.2], [0.2, 0.7, 1.4, 2.8], [3.35, -3.35, 4.65, -4.65]])
    ties = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], F32)  # round: halves to even, as PyTorch
    table = {}
    for op, fn in {"floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc}.items():
        samples = [S([grid.astype(F32)], ew(fn), "f32"), S([grid], ew(fn), "f64"),
                   S([fortran(grid.astype(F32))], ew(fn), "noncontig-transposed"),
                   S([np.array(-1.3, F32)], ew(fn), "scalar"),
                   S([ties], ew(fn), "ties", grad=False),
                   S([np.array([[-3, 0, 4]], np.int64)], ew(fn), "int64-unchanged", grad=False)]
        table[op] = OpInfo(op, samples, torch_unary(op))
    return table


def _binary_samples(fn, lhs, rhs, out=None, int_lhs=(-5, 6), int_rhs=(-5, 6), **kw):
    """Broadcasting, dtype promotion, non-contiguous and batch-1 cases for a binary op."""
    ref = ew(fn, out)
    return [
        S([lhs(3, 4), rhs(3, 4)], ref, "same-shape", **kw),
        S([lhs(3, 4), rhs(4)], ref, "broadcast-row", **kw),
        S([lhs(2, 1, 4), rhs(3, 1)], ref, "broadcast-both", **kw),
        S([lhs(3, 1), rhs(2, 3, 4)], ref, "broadcast-lhs-lower-rank", dynamic=False, **kw),
        S([lhs(3, 4), rhs()], ref, "scalar-rhs", **kw),
        S([lhs(2, 3, dtype=F64), rhs(2, 3, dtype=F64)], ref, "f64", **kw),
        S([lhs(3, 4), rhs(3, 4, dtype=F64)], ref, "f32-f64-promotes", **kw),
        S([fortran(lhs(4, 3)), strided(rhs(4, 3))], ref, "noncontig", **kw),
        S([lhs(1, 4), rhs(1, 4)], ref, "batch1", **kw),
        S([lhs(1, 4), rhs(3, 1)], ref, "batch1-broadcast", dynamic=False, **kw),
        S([ints(*int_lhs, 3, 4), ints(*int_rhs, 3, 4)], ref, "int64", grad=False, **kw),
        S([ints(*int_lhs, 3, 4), rhs(4)], ref, "int64-f32-promotes", **kw),
        S([lhs(), rhs()], ref, "0d", **kw),
    ]


def _binary_table():
    rn = lambda *shape, dtype=F32: randn(*shape, dtype=dtype)  # noqa: E731
    nz = lambda *shape, dtype=F32: nonzero(*shape, dtype=dtype)  # noqa: E731
    pos = lambda *shape, dtype=F32: uniform(0.5, 2.0, *shape, dtype=dtype)  # noqa: E731
    t = {info.op: info for info in [  # torch.add, torch.sub, ...: namesakes
        OpInfo("add", _binary_samples(np.add, rn, rn), torch_binary("add")),
        OpInfo("sub", _binary_samples(np.subtract, rn, rn), torch_binary("sub")),
        OpInfo("mul", _binary_samples(np.multiply, rn, rn), torch_binary("mul")),
        OpInfo("div", _binary_samples(np.true_divide, rn, nz, out="float", int_rhs=(1, 6)),
               lambda ts, a: T().div(ts[0], ts[1], rounding_mode=a["rounding_mode"])),
        OpInfo("pow", _binary_samples(np.power, pos, rn, int_lhs=(1, 5), int_rhs=(0, 4)), torch_binary("pow")),
        OpInfo("maximum", _binary_samples(np.maximum, rn, rn), torch_binary("maximum")),
        OpInfo("minimum", _binary_samples(np.minimum, rn, rn), torch_binary("minimum")),
    ]}
    t["pow"].samples.append(S([uniform(0.5, 2.0, 3, 4), np.array(2.0, F32)], ew(np.power), "square"))
    t["div"].samples.append(S([ints(1, 9, 2, 3), ints(1, 9, 2, 3)], ew(np.true_divide, "float"),
                              "int-int-gives-f32", grad=False))
    t["div"].samples += _rounded_div_samples()
    t["pow"].samples.append(S([np.array([0, 1, -1, -1, 2, -2, 3]), np.array([-1, -2, -3, -2, -1, -3, 2])],
                              _int_pow_ref, "int64-negative-exponents", grad=False))
    t["pow"].samples.append(S([np.array([True, False, True]), np.array([2, 0, -1])], _int_pow_ref,
                              "bool-int64-gives-int64", grad=False))
    return list(t.values())


# Literal inputs (no draws from the table's generator, so samples built later keep their inputs):
# signs on both sides, quotients well away from integers except where the rounding is the point.
_NUMERATORS = np.array([7.5, -7.5, 7.5, -7.5, 0.3, -0.3, 6.0, 1.0, -1.0])
_DENOMINATORS = np.array([2.0, 2.0, -2.0, -2.0, 0.7, 0.7, 3.0, 0.1, 0.1])  # 1 / 0.1: floor 9, trunc 10 in f32
_INT_NUMERATORS = np.array([7, -7, 7, -7, 0, 6, -6, 1, 9], np.int64)
_INT_DENOMINATORS = np.array([2, 2, -2, -2, 3, 3, 4, -5, 9], np.int64)


def _rounded_div_ref(ins, attrs):
    """Floor: Python's ``//`` on the exact values (float64 holds float32 inputs exactly); trunc:
    PyTorch's definition, the true quotient rounded in the result dtype, then truncated. Ints:
    sign(a) sign(b) (|a| // |b|), exact."""
    a, b = ins
    dt = promote(a, b)
    if dt.kind != "f":
        a, b = a.astype(dt), b.astype(dt)
        if attrs["rounding_mode"] == "floor":
            return [np.floor_divide(a, b)]
        return [(np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(dt)]
    with np.errstate(divide="ignore", invalid="ignore"):
        if attrs["rounding_mode"] == "floor":
            return [np.floor_divide(a.astype(F64), b.astype(F64)).astype(dt)]
        return [np.trunc(np.true_divide(a.astype(dt), b.astype(dt)))]


def _rounded_div_samples():
    a32, b32 = _NUMERATORS.astype(F32), _DENOMINATORS.astype(F32)
    ia, ib = _INT_NUMERATORS, _INT_DENOMINATORS
    samples = []
    for mode in ("floor", "trunc"):
        kw = {"attrs": {"rounding_mode": mode}, "grad": False}
        samples += [
            S([a32, b32], _rounded_div_ref, f"{mode}-f32", **kw),
            S([ia, ib], _rounded_div_ref, f"{mode}-int64-keeps-int64", **kw),
            S([ia, b32], _rounded_div_ref, f"{mode}-int64-f32-promotes", **kw),
            S([ia > 0, ib], _rounded_div_ref, f"{mode}-bool-int64", **kw),
            S([np.array(-7.5), np.array(2.0)], _rounded_div_ref, f"{mode}-0d-f64", **kw),
            S([np.array([1.0, -1.0, 0.0, 3.5], F32), np.zeros(4, F32)], _rounded_div_ref,
              f"{mode}-f32-by-zero", **kw),
        ]
    # away from the jumps floor and trunc are flat: the vjp says 0, and finite differences agree
    samples.append(S([np.array([[7.3, -7.3], [4.1, -0.6]]), np.array([2.0, 0.7])], _rounded_div_ref,
                     "floor-f64-gradient-zero", {"rounding_mode": "floor"}, dynamic=False))
    return samples


def _int_pow_ref(ins, attrs):
    """PyTorch's integer power: a negative exponent gives 0, or 1 / (-1)**e for a base of +-1."""
    def one(base, e):
        if e >= 0:
            return base ** e
        return (-1) ** (e % 2) if base == -1 else 1 if base == 1 else 0
    a, e = (x.astype(np.int64).tolist() for x in ins)
    return [np.array([one(x, y) for x, y in zip(a, e)], np.int64)]


def _compare_samples(fn, bool_ok):
    ref = ew(fn, "bool")
    a = randn(3, 4)
    b = a.copy()
    b[0] += 1.0
    b[1] -= 1.0  # row 2 ties exactly
    ia = ints(-3, 4, 3, 4)
    samples = [
        S([a, b], ref, "f32-with-ties", grad=False),
        S([randn(3, 4), randn(4)], ref, "broadcast", grad=False),
        S([randn(2, 3, dtype=F64), randn(2, 1, dtype=F64)], ref, "f64", grad=False),
        S([ia, ints(-3, 4, 3, 4).astype(F32)], ref, "int64-f32", grad=False),
        S([ia, ia[::-1].copy()], ref, "int64", grad=False),
        S([fortran(randn(4, 3)), strided(randn(4, 3))], ref, "noncontig", grad=False),
        S([randn(1, 4), randn(1, 4)], ref, "batch1", grad=False),
        S([randn(3), np.array(0.0, F32)], ref, "scalar-rhs", grad=False),
        S([randn(), randn()], ref, "0d", grad=False),
    ]
    if bool_ok:
        samples.append(S([bools(2, 3), bools(2, 3)], ref, "bool", grad=False))
    return samples


def _compare_table():
    return [OpInfo(op, _compare_samples(fn, bool_ok=op in ("eq", "ne")), torch_binary(op))  # torch.eq, ...
            for op, fn in {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                           "gt": np.greater, "ge": np.greater_equal}.items()]


def _where_ref(ins, attrs):
    c, a, b = ins
    return [np.where(c, a.astype(F64), b.astype(F64)).astype(promote(a, b))]


def _leaky_ref(ins, attrs):
    x = ins[0].astype(F64)
    return [np.where(x > 0, x, x * attrs.get("negative_slope", 0.01)).astype(ins[0].dtype)]


def _hardtanh_ref(ins, attrs):
    x = ins[0].astype(F64)
    return [np.clip(x, attrs.get("min_val", -1.0), attrs.get("max_val", 1.0)).astype(ins[0].dtype)]


def _off_bounds(x, *bounds):
    """Values at least 0.05 away from each bound: the gradient has kinks there."""
    for bound in bounds:
        x = np.where(np.abs(x - bound) < 0.05, x + 0.1, x).astype(x.dtype)
    return x


def _cast_ref(ins, attrs):
    x, dt = ins[0], np.dtype(attrs["dtype"])
    if dt == np.int64 and x.dtype.kind == "f":
        x = np.trunc(x)  # float -> int rounds toward zero
    if dt == np.bool_:
        return [x != 0]
    return [x.astype(dt)]


def _other_elementwise():
    t = [OpInfo("where", torch=lambda ts, a: T().where(*ts), samples=[
        S([bools(3, 4), randn(3, 4), randn(3, 4)], _where_ref, "same-shape"),
        S([bools(4), randn(3, 4), np.array(0.5, F32)], _where_ref, "broadcast-scalar", dynamic=False),
        S([bools(3, 1), ints(-3, 3, 3, 4), randn(4)], _where_ref, "int64-f32-promotes"),
        S([bools(2, 3), randn(2, 3, dtype=F64), randn(2, 3, dtype=F64)], _where_ref, "f64"),
        S([fortran(bools(4, 3)), fortran(randn(4, 3)), strided(randn(4, 3))], _where_ref, "noncontig"),
        S([bools(1, 4), randn(1, 4), randn(1, 4)], _where_ref, "batch1"),
        S([bools(), randn(), randn()], _where_ref, "0d"),
    ])]
    nz = nonzero(3, 4)
    t.append(OpInfo("leaky_relu", torch=lambda ts, a: TF().leaky_relu(ts[0], a["negative_slope"]), samples=[
        S([nz], _leaky_ref, "default-slope"),
        S([nonzero(2, 5)], _leaky_ref, "slope-0.2", {"negative_slope": 0.2}),
        S([nonzero(2, 3, dtype=F64)], _leaky_ref, "f64", {"negative_slope": 0.1}),
        S([fortran(nonzero(4, 3))], _leaky_ref, "noncontig", {"negative_slope": 0.3}),
        S([nonzero(1, 6)], _leaky_ref, "batch1"),
        S([nonzero()], _leaky_ref, "0d", {"negative_slope": 0.2}),
    ]))
    t.append(OpInfo("hardtanh", torch=lambda ts, a: TF().hardtanh(ts[0], a["min_val"], a["max_val"]), samples=[
        S([_off_bounds(randn(3, 4, scale=2.0), -1, 1)], _hardtanh_ref, "default-bounds"),
        S([_off_bounds(uniform(-2, 8, 2, 5), 0, 6)], _hardtanh_ref, "relu6", {"min_val": 0.0, "max_val": 6.0}),
        S([_off_bounds(randn(2, 3, dtype=F64), -0.5, 0.5)], _hardtanh_ref, "f64", {"min_val": -0.5, "max_val": 0.5}),
        S([fortran(_off_bounds(randn(4, 3, scale=2.0), -1, 1))], _hardtanh_ref, "noncontig"),
        S([np.array([-1.0, 1.0, 0.0, 2.0], F32)], _hardtanh_ref, "at-bounds", grad=False),
        S([np.array(0.3, F32)], _hardtanh_ref, "0d", {"min_val": 0.0, "max_val": 6.0}),
    ]))
    whole = np.array([[-2.75, -1.5, -0.25, 0.0], [0.25, 1.5, 2.75, 3.0]], F32)  # no .5 rounding ties
    t.append(OpInfo("cast", torch=lambda ts, a: ts[0].to(getattr(T(), a["dtype"])), samples=[
        S([randn(3, 4)], _cast_ref, "f32-to-f64", {"dtype": "float64"}),
        S([randn(3, 4, dtype=F64)], _cast_ref, "f64-to-f32", {"dtype": "float32"}),
        S([whole], _cast_ref, "f32-to-int64-truncates", {"dtype": "int64"}, grad=False),
        S([ints(-4, 5, 2, 3)], _cast_ref, "int64-to-f32", {"dtype": "float32"}, grad=False),
        S([bools(2, 3)], _cast_ref, "bool-to-f32", {"dtype": "float32"}, grad=False),
        S([whole], _cast_ref, "f32-to-bool", {"dtype": "bool"}, grad=False),
        S([ints(-2, 3, 2, 3)], _cast_ref, "int64-to-bool", {"dtype": "bool"}, grad=False),
        S([fortran(randn(4, 3))], _cast_ref, "noncontig", {"dtype": "float64"}),
        S([randn(1, 3, dtype=F64)], _cast_ref, "batch1", {"dtype": "float32"}),
        S([randn()], _cast_ref, "0d", {"dtype": "float64"}),
    ]))
    t.append(OpInfo("logical_not", torch=torch_unary("logical_not"), samples=[
        S([bools(3, 4)], ew(np.logical_not), "2d", grad=False),
        S([fortran(bools(4, 3))], ew(np.logical_not), "noncontig", grad=False),
        S([bools(1, 5)], ew(np.logical_not), "batch1", grad=False),
        S([np.array(True)], ew(np.logical_not), "scalar", grad=False),
    ]))
    return t


# ---- reductions -----------------------------------------------------------------------------

def _reduce_ref(kind):
    def ref(ins, attrs):
        x, dims, keep = ins[0], attrs.get("dims"), attrs.get("keepdim", False)
        axis = None if dims is None else tuple(dims)
        if kind == "max":
            return [np.asarray(np.amax(x, axis=axis, keepdims=keep))]
        out_dt = I64 if x.dtype == BOOL else x.dtype
        acc = x.astype(F64 if x.dtype.kind == "f" else I64)
        fn = np.sum if kind == "sum" else np.mean
        return [np.asarray(fn(acc, axis=axis, keepdims=keep)).astype(out_dt)]
    return ref


def _torch_reduce(name):
    def run(ts, a):
        x, dims = ts[0], a["dims"]
        return getattr(T(), name)(x, dim=tuple(range(x.ndim)) if dims is None else tuple(dims), keepdim=a["keepdim"])
    return run


def _reduce(kind, torch_name):
    ref = _reduce_ref(kind)
    gen = distinct if kind == "max" else randn  # max: no ties, so gradients are well defined
    samples = [
        S([gen(2, 3, 4)], ref, "all"),
        S([gen(2, 3, 4)], ref, "all-keepdim", {"dims": None, "keepdim": True}),
        S([gen(2, 3, 4)], ref, "dim1", {"dims": [1]}),
        S([gen(2, 3, 4)], ref, "dims02-keepdim", {"dims": (0, 2), "keepdim": True}),
        S([gen(3, 5)], ref, "neg-dim-keepdim", {"dims": (-1,), "keepdim": True}),
        S([gen(2, 3, dtype=F64)], ref, "f64", {"dims": (0,)}),
        S([fortran(gen(4, 3))], ref, "noncontig", {"dims": (1,)}),
        S([gen(1, 4)], ref, "batch1", {"dims": (1,)}),
        S([gen()], ref, "0d"),
    ]
    if kind != "mean":
        samples.append(S([ints(-5, 6, 3, 4)], ref, "int64", {"dims": (1,)}, grad=False))
    if kind == "sum":
        samples.append(S([bools(3, 4)], ref, "bool-counts", {"dims": (0,)}, grad=False))
    return OpInfo(kind, samples, _torch_reduce(torch_name))


def _argmax_ref(ins, attrs):
    x, dim, keep = ins[0], attrs.get("dim"), attrs.get("keepdim", False)
    if dim is None:
        idx = np.asarray(np.argmax(x.reshape(-1)))
        return [idx.reshape((1,) * x.ndim if keep else ()).astype(I64)]
    idx = np.argmax(x, axis=dim)
    return [(np.expand_dims(idx, dim) if keep else idx).astype(I64)]


def _argmax():
    r = _argmax_ref
    return OpInfo("argmax", torch=lambda ts, a: T().argmax(ts[0], dim=a["dim"], keepdim=a["keepdim"]), samples=[
        S([distinct(3, 4)], r, "all", grad=False),
        S([distinct(2, 3, 4)], r, "all-keepdim", {"keepdim": True}, grad=False),
        S([distinct(3, 4)], r, "dim1", {"dim": 1}, grad=False),
        S([distinct(2, 3, 4)], r, "neg-dim-keepdim", {"dim": -1, "keepdim": True}, grad=False),
        S([distinct(3, 4, dtype=F64)], r, "f64-dim0", {"dim": 0}, grad=False),
        S([np.array([[3, 9, 1], [7, 2, 8]], I64)], r, "int64", {"dim": 1}, grad=False),
        S([fortran(distinct(4, 3))], r, "noncontig", {"dim": 1}, grad=False),
        S([distinct(1, 6)], r, "batch1", {"dim": 1}, grad=False),
        S([distinct()], r, "0d", grad=False),
    ])


def _finite_ref(ins, attrs):
    return [np.array(True)]  # finite inputs pass; tests/test_nonfinite.py covers the raising


def _assert_finite():
    r = _finite_ref
    no_torch = "a training step's NaN/inf guard, no PyTorch op; tests/test_nonfinite.py checks it raising"
    return OpInfo("assert_finite", no_torch=no_torch, samples=[
        S([randn(3, 4)], r, "one", {"names": ["x"]}, grad=False),
        S([randn(2, 3), randn(2, dtype=F64), np.array(1.5, F32)], r, "mixed", {"names": ["a", "b", "c"]},
          grad=False, dynamic=False),
        S([fortran(randn(4, 3))], r, "noncontig", {"names": ["x"]}, grad=False),
        S([randn(1, 4)], r, "batch1", {"names": ["x"]}, grad=False),
        S([randn()], r, "0d", {"names": ["loss"]}, grad=False),
    ])


def _reduction_table():
    return [_reduce("sum", "sum"), _reduce("mean", "mean"), _reduce("max", "amax"), _argmax(), _assert_finite()]


# ---- shape ops -------------------------------------------------------------------------------

def _reshape_ref(ins, attrs):
    return [np.reshape(ins[0], tuple(attrs["shape"]))]


def _flatten_ref(ins, attrs):
    x = ins[0]
    if x.ndim == 0:
        return [x.reshape(1)]
    s, e = attrs.get("start_dim", 0) % x.ndim, attrs.get("end_dim", -1) % x.ndim
    merged = int(np.prod(x.shape[s:e + 1], dtype=np.int64))
    return [x.reshape(x.shape[:s] + (merged,) + x.shape[e + 1:])]


def _permute_ref(ins, attrs):
    return [np.transpose(ins[0], attrs["perm"])]


def _concat_ref(ins, attrs):
    dt = promote(*ins)
    return [np.concatenate([a.astype(dt) for a in ins], axis=attrs.get("dim", 0))]


def slice_ref(ins, attrs):
    """np.take per axis with explicit index lists (not basic indexing, as the kernel uses)."""
    x, drop = ins[0], set(attrs.get("drop", ()))
    for axis in reversed(range(x.ndim)):
        start, stop, step = attrs["slices"][axis]
        if axis in drop:
            x = np.take(x, start, axis=axis)
        else:
            x = np.take(x, np.arange(x.shape[axis])[start:stop:step], axis=axis)
    return [x]


def _full_ref(ins, attrs):
    return [np.full(tuple(attrs["shape"]), attrs["value"], np.dtype(attrs.get("dtype", "float32")))]


def _torch_full(ts, a):
    return T().full(a["shape"], a["value"], dtype=getattr(T(), a["dtype"]))


def _broadcast_ref(ins, attrs):
    return [np.broadcast_to(ins[0], tuple(attrs["shape"])).copy()]


def _shape_table():
    a = randn(2, 3, 4)
    rs, fl, pm, cc, sl, bc = _reshape_ref, _flatten_ref, _permute_ref, _concat_ref, slice_ref, _broadcast_ref
    full = (None, None, 1)
    t = []
    t.append(OpInfo("reshape", torch=lambda ts, a: T().reshape(ts[0], a["shape"]), samples=[
        S([a], rs, "infer-last", {"shape": (-1, 4)}),
        S([a], rs, "infer-middle", {"shape": (2, -1, 2)}),
        S([a], rs, "static", {"shape": (6, 4)}, dynamic=False),
        S([a], rs, "to-1d", {"shape": (-1,)}),
        S([fortran(randn(3, 4))], rs, "noncontig", {"shape": (-1, 6)}, dynamic=False),
        S([randn(2, 3, dtype=F64)], rs, "f64", {"shape": (-1, 1, 3)}),
        S([ints(0, 9, 4, 3)], rs, "int64", {"shape": (-1, 2)}, grad=False, dynamic=False),
        S([randn(1, 6)], rs, "batch1", {"shape": (1, 2, 3)}, dynamic=False),
        S([randn()], rs, "0d-to-1d", {"shape": (-1,)}),
    ]))
    b4 = randn(2, 3, 2, 2)
    t.append(OpInfo("flatten", torch=lambda ts, a: T().flatten(ts[0], a["start_dim"], a["end_dim"]), samples=[
        S([b4], fl, "all"),
        S([b4], fl, "from-dim1", {"start_dim": 1}),
        S([b4], fl, "middle", {"start_dim": 1, "end_dim": 2}),
        S([b4], fl, "neg-end", {"start_dim": 0, "end_dim": -2}),
        S([np.array(1.5, F32)], fl, "scalar"),
        S([fortran(b4)], fl, "noncontig", {"start_dim": 1}),
        S([randn(2, 3, 2, dtype=F64)], fl, "f64", {"start_dim": 1}),
        S([randn(1, 2, 3)], fl, "batch1", {"start_dim": 1}),
    ]))
    t.append(OpInfo("permute", torch=lambda ts, a: T().permute(ts[0], a["perm"]), samples=[
        S([a], pm, "3d", {"perm": (2, 0, 1)}),
        S([a], pm, "negative-axes", {"perm": (-1, 0, -2)}),
        S([randn(3, 4)], pm, "transpose", {"perm": (1, 0)}),
        S([fortran(randn(2, 3, 4))], pm, "noncontig", {"perm": (1, 2, 0)}),
        S([randn(2, 3, dtype=F64)], pm, "f64", {"perm": (1, 0)}),
        S([ints(0, 9, 2, 3)], pm, "int64", {"perm": (1, 0)}, grad=False),
        S([randn(1, 2, 3)], pm, "batch1", {"perm": (0, 2, 1)}),
        S([randn()], pm, "0d", {"perm": ()}),
    ]))
    t.append(OpInfo("concat", torch=lambda ts, a: T().cat(ts, a["dim"]), samples=[
        S([randn(2, 3), randn(3, 3)], cc, "dim0", {"dim": 0}, dynamic=False),
        S([randn(2, 3), randn(2, 4)], cc, "dim1", {"dim": 1}),
        S([randn(2, 3, 1), randn(2, 3, 2), randn(2, 3, 3)], cc, "three-neg-dim", {"dim": -1}),
        S([randn(2, 3)], cc, "single", {"dim": 1}),
        S([randn(2, 3), randn(2, 2, dtype=F64)], cc, "f32-f64-promotes", {"dim": 1}),
        S([ints(0, 9, 2, 2), ints(0, 9, 2, 1)], cc, "int64", {"dim": 1}, grad=False),
        S([fortran(randn(3, 2)), strided(randn(3, 3))], cc, "noncontig", {"dim": 1}),
        S([randn(1, 2), randn(1, 3)], cc, "batch1", {"dim": 1}),
    ]))
    m = randn(3, 5)
    t.append(OpInfo("slice", torch=torch_slice, samples=[
        S([m], sl, "range", {"slices": [full, (1, 3, 1)]}),
        S([m], sl, "step2", {"slices": [full, (None, None, 2)]}),
        S([m], sl, "negative-indices", {"slices": [full, (-3, -1, 1)]}),
        S([m], sl, "negative-step", {"slices": [full, (None, None, -1)]}),
        S([m], sl, "negative-step-bounds", {"slices": [full, (4, 0, -2)]}),
        S([m], sl, "int-index-dropped", {"slices": [full, (-1, None, 1)], "drop": (1,)}),
        S([m], sl, "stop-clamped", {"slices": [full, (2, 100, 1)]}),
        S([m], sl, "batch-dim-bounds", {"slices": [(1, None, 1), (None, 4, 1)]}, dynamic=False),
        S([m], sl, "drop-batch-dim", {"slices": [(2, None, 1), full], "drop": (0,)}, dynamic=False),
        S([m], sl, "empty", {"slices": [full, (3, 1, 1)]}),
        S([randn(2, 3, 4, dtype=F64)], sl, "f64-3d", {"slices": [full, (0, 1, 1), (1, None, 2)], "drop": (1,)}),
        S([fortran(m)], sl, "noncontig", {"slices": [full, (1, None, 2)]}),
        S([ints(0, 9, 3, 4)], sl, "int64", {"slices": [full, (1, 3, 1)]}, grad=False),
        S([randn(1, 5)], sl, "batch1", {"slices": [full, (None, None, 3)]}),
    ]))
    t.append(OpInfo("full", torch=_torch_full, samples=[
        S([], _full_ref, "f32", {"shape": (2, 3), "value": 1.5}, grad=False),
        S([], _full_ref, "f64-negative", {"shape": (3,), "value": -2.25, "dtype": "float64"}, grad=False),
        S([], _full_ref, "int64", {"shape": (2, 2), "value": 3, "dtype": "int64"}, grad=False),
        S([], _full_ref, "bool", {"shape": (1, 3), "value": 1.0, "dtype": "bool"}, grad=False),
        S([], _full_ref, "scalar", {"shape": (), "value": 0.5}, grad=False),
    ]))
    # broadcast_to's target shape is static, so the input's leading dim must not become N.
    t.append(OpInfo("broadcast_to", torch=lambda ts, a: T().broadcast_to(ts[0], a["shape"]), samples=[
        S([randn(3, 1)], bc, "add-leading-dim", {"shape": (2, 3, 4)}, dynamic=False),
        S([randn(4)], bc, "row", {"shape": (3, 4)}, dynamic=False),
        S([np.array(2.5, F32)], bc, "scalar", {"shape": (2, 2)}),
        S([randn(2, 1, dtype=F64)], bc, "f64", {"shape": (2, 3)}, dynamic=False),
        S([strided(randn(1, 3))], bc, "noncontig", {"shape": (2, 3)}, dynamic=False),
        S([ints(0, 5, 3)], bc, "int64", {"shape": (2, 3)}, grad=False, dynamic=False),
        S([randn(1, 4)], bc, "batch1", {"shape": (3, 4)}, dynamic=False),
    ]))
    # Its gradient is zero by definition (finite differences would say one): test_autograd.py checks it.
    same = lambda ins, attrs: [ins[0].copy()]  # noqa: E731
    t.append(OpInfo("stop_gradient", torch=lambda ts, a: ts[0].detach(), samples=[
        S([randn(2, 3)], same, "f32", {}, grad=False),
        S([strided(randn(3, 4))], same, "noncontig", {}, grad=False),
        S([ints(0, 5, 3)], same, "int64", {}, grad=False),
        S([randn(2, 2, dtype=F64)], same, "f64", {}, grad=False),
    ]))
    return t


def _collective_table() -> list[OpInfo]:
    """In one process (the tests') a collective is the identity; what it does across processes
    is tests/test_distributed.py's (mpiexec -n 2). Last, so its draws shift no other entry."""
    same = lambda ins, attrs: [a.copy() for a in ins]  # noqa: E731
    why = "a collective over MPI processes: the identity in one process; 2 processes in test_distributed.py"
    return [OpInfo("allreduce", no_torch=why, samples=[
        S([randn(2, 3)], same, "mean", {"op": "mean"}),
        S([randn(2, 3), randn(4)], same, "bucket of two", {"op": "mean"}),
        S([randn(3, 2)], same, "sum", {"op": "sum"}),
        S([strided(randn(3, 4))], same, "noncontig", {"op": "mean"}),
        S([randn(2, 2, dtype=F64)], same, "f64", {"op": "sum"}),
    ])]


def _custom_call_sample(cls, inputs, ref, desc, **kw) -> Sample:
    """A ``custom_call`` of the custom op ``cls`` traced for ``inputs``: its attrs hold the
    bodies, and the constants the bodies use are trailing inputs, as gc.custom_op calls it."""
    from graphc.core.custom_ops import CustomOp, trace_bodies
    from graphc.ir.types import DType, TensorType

    types = tuple(TensorType(a.shape, DType.from_any(a.dtype)) for a in inputs)
    attrs, constants, _ = trace_bodies(CustomOp(cls), types, (), len(inputs), None)
    return S([*inputs, *constants], ref, desc, attrs, dynamic=False, **kw)


class _MulSaved:
    """Two inputs, two outputs, an intermediate saved for the backward (a residual output)."""

    @staticmethod
    def forward(ctx, a, b):
        product = a * b
        ctx.save_for_backward(a, b, product.tanh())
        return product, a - b

    @staticmethod
    def backward(ctx, grad_product, grad_difference):
        a, b, _ = ctx.saved_tensors
        return grad_product * b + grad_difference, grad_product * a - grad_difference


def _custom_table() -> list[OpInfo]:
    """Custom ops' calls (gc.custom_op). Last, so its draws shift no other entry."""
    from custom_op_examples import Log1pExp

    def mul_saved(ins, attrs):
        a, b = ins[0].astype(F64), ins[1].astype(F64)
        return [r.astype(ins[0].dtype) for r in (a * b, a - b, np.tanh(a * b))]

    def log1pexp(ins, attrs):
        return [np.logaddexp(0, ins[0].astype(F64)).astype(ins[0].dtype)]

    # A body is traced for its input types: the gradient checks (in float64) use float64 samples.
    why = "a user's op: PyTorch parity against autograd.Function equivalents is tests/test_custom_op.py's"
    f32 = "traced for float32 inputs; the gradient check runs in float64 (the float64 samples)"
    return [OpInfo("custom_call", no_torch=why, samples=[
        _custom_call_sample(Log1pExp, [randn(3, 4, scale=3.0)], log1pexp, "log1pexp", grad=False, no_torch=f32),
        _custom_call_sample(Log1pExp, [randn(2, 5, dtype=F64, scale=3.0)], log1pexp, "log1pexp f64"),
        _custom_call_sample(_MulSaved, [strided(randn(2, 3)), randn(2, 3)], mul_saved, "residual, noncontig",
                            grad=False),
        _custom_call_sample(_MulSaved, [randn(2, 3, dtype=F64), randn(2, 3, dtype=F64)], mul_saved,
                            "two in, two out, f64"),
    ])]


def _random_check(ins, attrs, outs):
    """Draws of the right shape and dtype whose sample mean and spread fit the distribution
    (4,096 or more draws: 6 standard errors of margin)."""
    (y,) = outs
    assert y.shape == tuple(attrs["shape"]) and y.dtype == np.dtype(attrs.get("dtype", "float32"))
    n = y.size
    if attrs.get("distribution", "normal") == "uniform":
        assert 0.0 <= y.min() and y.max() < 1.0
        mean, std = 0.5, math.sqrt(1 / 12)
    else:
        mean, std = 0.0, 1.0
    assert abs(float(y.mean()) - mean) < 6 * std / math.sqrt(n), float(y.mean())
    assert abs(float(y.std()) - std) < 0.05 * std, float(y.std())
    assert len(np.unique(y)) > n // 2  # fresh numbers, not one value repeated


def _random_table() -> list[OpInfo]:
    """``random``: draws from the plan's generator; no inputs, so no table draws. Last."""
    why = "random draws: PyTorch's generator gives other numbers; property checks instead (as dropout's)"
    return [OpInfo("random", no_torch=why, samples=[
        S([], None, "normal", {"shape": (64, 64), "distribution": "normal"}, check=_random_check, grad=False),
        S([], None, "uniform", {"shape": (64, 64), "distribution": "uniform"}, check=_random_check, grad=False),
        S([], None, "normal f64", {"shape": (4096,), "distribution": "normal", "dtype": "float64"},
          check=_random_check, grad=False),
        S([], None, "uniform 3-d", {"shape": (16, 16, 16), "distribution": "uniform"}, check=_random_check,
          grad=False),
    ])]


def build_table() -> dict[str, OpInfo]:
    """Every family's entries, in this order (the order the seeded inputs are drawn in)."""
    from op_table_grad import attention_table, backward_table, fused_table  # these need the helpers above
    from op_table_control import control_table
    from op_table_loss import loss_table
    from op_table_nn import nn_table
    from op_table_recurrent import recurrent_cell_table
    from op_table_conv_transpose import conv_transpose_table
    from op_table_vision import vision_backward_table, vision_table
    from op_table_scatter import scatter_table
    from op_table_math import math_table
    from op_table_special import special_table
    from op_table_linalg import linalg_table
    from op_table_sort import sort_table
    from op_table_cumulative import cumulative_table
    from op_table_float_steps import float_steps_table
    from op_table_fft import fft_table
    from op_table_bitwise import bitwise_table
    from op_table_fused_elementwise import fused_elementwise_table

    table: dict[str, OpInfo] = {}
    for build in (_unary_table, _binary_table, _compare_table, _other_elementwise, _reduction_table,
                  nn_table, backward_table, fused_table, _shape_table, loss_table, _collective_table,
                  _custom_table, control_table, _random_table, attention_table, recurrent_cell_table,
                  conv_transpose_table, vision_table, vision_backward_table, scatter_table, math_table,
                  special_table, linalg_table, sort_table, cumulative_table, float_steps_table, fft_table,
                  bitwise_table, fused_elementwise_table):
        for info in build():
            assert info.op not in table, f"two op_table entries for {info.op}"
            info.internal = build in (backward_table, fused_table, attention_table, recurrent_cell_table,
                                      vision_backward_table, fused_elementwise_table)
            table[info.op] = info
    return table


OP_INFO: dict[str, OpInfo] = build_table()
