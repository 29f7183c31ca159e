"""Shape-rule helpers shared by the op definitions (symbolic dims flow through)."""
from __future__ import annotations

from ..errors import ShapeError
from ..types import DType, TensorType, is_static, promote


def fmt_shape(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def broadcast(*shapes) -> tuple:
    """numpy broadcasting over int and symbolic dims (a symbol only matches itself or 1)."""
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        dims = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ShapeError("shapes " + " and ".join(fmt_shape(s) for s in shapes) + " do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def _promote_all(dtypes) -> DType:
    out = dtypes[0]
    for d in dtypes[1:]:
        out = promote(out, d)
    return out


def result_dtype(types) -> DType:
    """PyTorch's ``result_type``: 0-d tensors (and Python scalars, which arrive as 0-d values of
    their weak dtype) change the dtype of dimensioned tensors only from a higher category
    (bool < integer < float): ``f32[3] * f64[]`` is f32, ``i64[3] * f64[]`` is f64 and
    ``u8[3] + i64[]`` stays u8. Among tensors of one kind, ordinary promotion."""
    dimensioned = [t.dtype for t in types if t.rank]
    zero_dim = [t.dtype for t in types if not t.rank]
    if not dimensioned or not zero_dim:
        return _promote_all(dimensioned or zero_dim)
    high, low = _promote_all(dimensioned), _promote_all(zero_dim)
    return promote(high, low) if low.category > high.category else high


def one_dtype(types, op: str) -> DType:
    """The dtype shared by all ``types``: PyTorch's matmul, linear, conv and batch norm take no
    mixed dtypes and no bools (they raise; graphc used to promote, computing what PyTorch refuses)."""
    dtypes = sorted({t.dtype.name for t in types})
    if len(dtypes) > 1:
        raise ShapeError(f"{op} needs inputs of one dtype, as in PyTorch; got {', '.join(dtypes)} (cast first: x.float())")
    if dtypes == ["bool"]:
        raise ShapeError(f"{op} does not take bool tensors (as in PyTorch); cast first: x.float()")
    return types[0].dtype


def norm_axis(axis: int, rank: int, what: str = "dim") -> int:
    if not -max(rank, 1) <= axis < max(rank, 1):
        raise ShapeError(f"{what} {axis} is out of range for a rank-{rank} tensor")
    return axis % max(rank, 1)


def norm_axes(axes, rank: int) -> tuple:
    if axes is None:
        return tuple(range(rank))
    out = tuple(sorted({norm_axis(a, rank) for a in axes}))
    if len(out) != len(axes):
        raise ShapeError(f"repeated dims in {tuple(axes)}")
    return out


def reduced_shape(shape, axes, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def need_float(t: TensorType, op: str) -> None:
    if not t.dtype.is_float:
        raise ShapeError(f"{op} needs a floating-point input, got {t.dtype.name}")


def need_rank(t: TensorType, ranks, op: str, what: str = "input") -> None:
    if t.rank not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise ShapeError(f"{op} expects a rank-{want} {what}, got {t} (rank {t.rank})")


def need_static(dims, op: str, what: str) -> None:
    for d in dims:
        if not is_static(d):
            raise ShapeError(f"{op}: {what} must not depend on the batch size (got {d})")


def window_out(size, kernel: int, stride: int, padding: int, dilation: int, op: str):
    if not is_static(size):  # a symbolic spatial dim (dynamic_dims): kept where the window keeps the size
        if stride == 1 and 2 * padding == dilation * (kernel - 1):
            return size
        shift = 2 * padding - dilation * (kernel - 1) - 1
        raise ShapeError(f"{op}: on the symbolic dim {size}, kernel {kernel} with stride {stride}, padding {padding} "
                         f"and dilation {dilation} would give floor(({size} {'+' if shift >= 0 else '-'} {abs(shift)}) "
                         f"/ {stride}) + 1, which a symbolic dim (a product of symbols) cannot express; symbolic "
                         "spatial dims pass through windows that keep the size (stride 1, padding (kernel - 1) / 2)")
    out = (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1
    if out <= 0:
        raise ShapeError(f"{op}: input size {size} is too small for kernel {kernel} "
                         f"(stride {stride}, padding {padding}, dilation {dilation})")
    return out



def check_pairs(attrs: dict, op: str, minimums: dict) -> None:
    """Window attrs must be pairs of ints at least their minimum (stride >= 1, padding >= 0...)."""
    for key, low in minimums.items():
        value = attrs.get(key)
        if value is None:
            continue
        if len(value) != 2:
            raise ShapeError(f"{op}: {key} must have 2 entries (height, width), got {tuple(value)}")
        if any(v < low for v in value):
            raise ShapeError(f"{op}: {key} must be >= {low}, got {tuple(value)}")


def need_numeric(t: TensorType, op: str) -> None:
    if t.dtype is DType.bool:
        raise ShapeError(f"{op} does not take bool tensors")


def expect_same(actual, expected, op: str, what: str) -> None:
    """A backward op's input must have the shape its forward produced."""
    if actual.shape != expected.shape:
        raise ShapeError(f"{op}: {what} {actual} does not match the forward's {expected}")
