"""BLAS-like products of issue #34, each a composite over ``matmul``, ``mul`` and ``sum``
(autodiff gives the gradients): addmm, addbmm, baddbmm, addmv, addr, mv, dot, vdot, inner,
outer, tensordot and einsum (cross, cdist, dist: functions_distance.py).

``einsum`` takes diagonals of repeated letters, sums letters only one operand has, then
contracts the operands left to right, each pair through one batched ``matmul`` (or through a
broadcast multiply and sum when a group of letters cannot be merged into one dim: a symbolic
batch dim among other letters, or sizes that broadcast).
"""
from __future__ import annotations

import math
import string

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import GraphcError, ShapeError
from ..ir.types import is_static
from ._pinning import pin_broadcast, pin_dim, pin_equal
from .surface import torchsymbol

_METHOD_AND_TOP = dict(functional=False)


def _scaled(x, factor):
    return x if isinstance(factor, (int, float)) and not isinstance(factor, bool) and factor == 1 else x * factor


def _reshape(x, dims):
    """``x.reshape`` with dims as the IR writes them (symbols as strings)."""
    return apply("reshape", [x], {"shape": [d if isinstance(d, str) else int(d) for d in dims]})


def _beta_plus(input, beta, product, alpha):
    """``beta * input + alpha * product``; input is ignored when beta is 0, as PyTorch (NaN too)."""
    product = _scaled(product, alpha)
    pin_broadcast(input, product)
    if isinstance(beta, (int, float)) and beta == 0:
        return _broadcast_like(product, input)
    return apply("add", [_scaled(input, beta), product])


def _broadcast_like(product, input):
    """The product broadcast against input's shape (beta = 0 keeps only input's shape)."""
    zeros = apply("where", [apply("eq", [input.detach(), input.detach()]), 0, 0]).cast(product.dtype)
    return apply("add", [product, zeros])


@torchsymbol(**_METHOD_AND_TOP)
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)`` with 2-d mats (input broadcasts).

    >>> import graphc as gc
    >>> gc.addmm(gc.ones(2, 2), gc.ones(2, 3), gc.ones(3, 2), alpha=2).numpy().tolist()
    [[7.0, 7.0], [7.0, 7.0]]
    """
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(f"addmm takes 2-d mat1 and mat2, got {mat1.ndim}-d and {mat2.ndim}-d")
    pin_equal(mat1, 1, mat2, 0)
    return _beta_plus(input, beta, apply("matmul", [mat1, mat2]), alpha)


def _pin_batches(batch1, batch2):
    pin_equal(batch1, 0, batch2, 0)
    pin_equal(batch1, 2, batch2, 1)


@torchsymbol(**_METHOD_AND_TOP)
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * bmm(batch1, batch2)`` with 3-d batches.

    >>> import graphc as gc
    >>> gc.baddbmm(gc.zeros(2, 1, 4), gc.ones(2, 1, 3), gc.ones(2, 3, 4)).shape
    (2, 1, 4)
    """
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise ShapeError(f"baddbmm takes 3-d batches, got {batch1.ndim}-d and {batch2.ndim}-d")
    _pin_batches(batch1, batch2)
    return _beta_plus(input, beta, apply("matmul", [batch1, batch2]), alpha)


@torchsymbol(**_METHOD_AND_TOP)
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])`` with 3-d batches.

    >>> import graphc as gc
    >>> gc.addbmm(gc.zeros(1, 4), gc.ones(2, 1, 3), gc.ones(2, 3, 4)).numpy().tolist()
    [[6.0, 6.0, 6.0, 6.0]]
    """
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise ShapeError(f"addbmm takes 3-d batches, got {batch1.ndim}-d and {batch2.ndim}-d")
    _pin_batches(batch1, batch2)
    product = apply("sum", [apply("matmul", [batch1, batch2])], {"dims": (0,), "keepdim": False})
    return _beta_plus(input, beta, product, alpha)


@torchsymbol(**_METHOD_AND_TOP)
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)``.

    >>> import graphc as gc
    >>> gc.addmv(gc.ones(2), gc.ones(2, 3), gc.ones(3)).numpy().tolist()
    [4.0, 4.0]
    """
    return _beta_plus(input, beta, mv(mat, vec), alpha)


@torchsymbol(**_METHOD_AND_TOP)
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)``.

    >>> import graphc as gc
    >>> gc.addr(gc.zeros(2, 2), gc.tensor([1.0, 2.0]), gc.tensor([1.0, 3.0])).numpy().tolist()
    [[1.0, 3.0], [2.0, 6.0]]
    """
    return _beta_plus(input, beta, outer(vec1, vec2), alpha)


@torchsymbol(**_METHOD_AND_TOP)
def mv(input, vec):
    """The matrix-vector product of a 2-d and a 1-d tensor.

    >>> import graphc as gc
    >>> gc.mv(gc.ones(2, 3), gc.tensor([1.0, 2.0, 3.0])).numpy().tolist()
    [6.0, 6.0]
    """
    if input.ndim != 2 or vec.ndim != 1:
        raise ShapeError(f"mv takes a 2-d and a 1-d tensor, got {input.ndim}-d and {vec.ndim}-d")
    pin_equal(input, 1, vec, 0)
    return apply("matmul", [input, vec.unsqueeze(-1)]).squeeze(-1)


def _vectors(input, other, what):
    if input.ndim != 1 or other.ndim != 1:
        raise ShapeError(f"{what} takes two 1-d tensors, got {input.ndim}-d and {other.ndim}-d")
    pin_equal(input, 0, other, 0)
    if all(is_static(d) for d in (input.dims[0], other.dims[0])) and input.dims[0] != other.dims[0]:
        raise ShapeError(f"{what}: the vectors have {input.dims[0]} and {other.dims[0]} elements")


@torchsymbol(**_METHOD_AND_TOP)
def dot(input, other):
    """The inner product of two 1-d tensors (a 0-d tensor).

    >>> import graphc as gc
    >>> gc.dot(gc.tensor([1.0, 2.0]), gc.tensor([3.0, 4.0])).item()
    11.0
    """
    _vectors(input, other, "dot")
    return apply("sum", [apply("mul", [input, other])], {"dims": None, "keepdim": False})


@torchsymbol(**_METHOD_AND_TOP)
def vdot(input, other):
    """``dot`` with the first vector conjugated: the same for graphc's real tensors."""
    _vectors(input, other, "vdot")
    return dot(input, other)


@torchsymbol(**_METHOD_AND_TOP, names=("ger",))
def outer(input, vec2):
    """The outer product of two 1-d tensors, ``input[:, None] * vec2[None, :]``.

    >>> import graphc as gc
    >>> gc.outer(gc.tensor([1.0, 2.0]), gc.tensor([1.0, 3.0])).numpy().tolist()
    [[1.0, 3.0], [2.0, 6.0]]
    """
    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"outer takes two 1-d tensors, got {input.ndim}-d and {vec2.ndim}-d")
    return apply("mul", [input.unsqueeze(1), vec2.unsqueeze(0)])


def _letters(n, start=0):
    return string.ascii_letters[start:start + n]


@torchsymbol(**_METHOD_AND_TOP)
def inner(input, other):
    """The sum over the last dims of both (a scalar operand multiplies).

    >>> import graphc as gc
    >>> gc.inner(gc.ones(2, 3), gc.ones(4, 3)).shape
    (2, 4)
    """
    if input.ndim == 0 or other.ndim == 0:
        return apply("mul", [input, other])
    a, b = _letters(input.ndim - 1), _letters(other.ndim - 1, 26)
    return einsum(f"{a}z,{b}z->{a}{b}", input, other)


@torchsymbol(method=False, functional=False)
def tensordot(a, b, dims=2, out=None):
    """Sum over ``dims`` (an int: a's last and b's first; or two lists of dims) of a and b.

    >>> import graphc as gc
    >>> gc.tensordot(gc.ones(2, 3, 4), gc.ones(3, 4, 5)).shape
    (2, 5)
    >>> gc.tensordot(gc.ones(2, 3), gc.ones(3, 2), dims=([1, 0], [0, 1])).item()
    6.0
    """
    if out is not None:
        raise GraphcError("tensordot: out= is not supported (graphc's tensors are values); use the result")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0 or dims > min(a.ndim, b.ndim):
            raise ShapeError(f"tensordot: dims={dims} must be in [0, {min(a.ndim, b.ndim)}]")
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(dims_a) != len(dims_b):
        raise ShapeError(f"tensordot: {len(dims_a)} dims of a against {len(dims_b)} dims of b")
    la, lb = list(_letters(a.ndim)), list(_letters(b.ndim, 26))
    for da, db in zip(dims_a, dims_b):
        lb[db % b.ndim] = la[da % a.ndim]
    keep = [c for c in la if c not in lb] + [c for c in lb if c not in la]
    return einsum(f"{''.join(la)},{''.join(lb)}->{''.join(keep)}", a, b)


def _parse(equation, operands):
    """(letters per operand, output letters): '...' becomes private letters, right-aligned."""
    equation = equation.replace(" ", "")
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ShapeError(f"einsum: {equation!r} names {len(terms)} operands, got {len(operands)}")
    ell_rank = 0
    for term, x in zip(terms, operands):
        if "..." in term:
            ell_rank = max(ell_rank, x.ndim - len(term.replace("...", "")))
    ell = [chr(0x100 + i) for i in range(ell_rank)]
    subs = []
    for term, x in zip(terms, operands):
        n = x.ndim - len(term.replace("...", "")) if "..." in term else 0
        letters = term.replace("...", "\0").replace("\0", "".join(ell[ell_rank - n:]))
        if not all(c.isalpha() for c in letters) or len(letters) != x.ndim:
            raise ShapeError(f"einsum: {term!r} does not fit an operand of rank {x.ndim}")
        subs.append(letters)
    if arrow:
        output = out.replace("...", "".join(ell))
    else:
        counts = "".join(subs)
        output = "".join(ell) + "".join(sorted(c for c in set(counts) if counts.count(c) == 1 and c not in ell))
    if len(set(output)) != len(output) or any(c not in "".join(subs) for c in output):
        raise ShapeError(f"einsum: the output of {equation!r} repeats a letter or names one no operand has")
    return subs, output


def _take_diagonals(x, letters):
    """Repeated letters in one operand: their diagonal (moved to the end by ``diagonal``)."""
    while len(set(letters)) != len(letters):
        c = next(c for c in letters if letters.count(c) > 1)
        i = letters.index(c)
        j = letters.index(c, i + 1)
        if not (is_static(x.dims[i]) and is_static(x.dims[j])):
            pin_dim(x, i)  # a diagonal's length must be known: the plan is traced again at this size
            pin_dim(x, j)
            raise ShapeError(f"einsum: the diagonal of letter {c!r} along a symbolic dim ({x.dims[i]}, {x.dims[j]})")
        x = x.diagonal(0, i, j)
        letters = letters[:i] + letters[i + 1:j] + letters[j + 1:] + c
    return x, letters


def _sum_letters(x, letters, drop):
    dims = tuple(i for i, c in enumerate(letters) if c in drop)
    if not dims:
        return x, letters
    return apply("sum", [x], {"dims": dims, "keepdim": False}), "".join(c for c in letters if c not in drop)


def _permute(x, letters, order):
    if letters == order:
        return x
    return x.permute(*[letters.index(c) for c in order])


def _merged(sizes):
    """One dim for a group of letters: their product, or None when it cannot be written."""
    if len(sizes) == 1:
        return sizes[0]
    if all(is_static(s) for s in sizes):
        return math.prod(int(s) for s in sizes)
    return None


def _contract(x, lx, y, ly, keep):
    """x (letters lx) times y (letters ly), summing the shared letters not in ``keep``."""
    for c in lx:
        if c in ly:
            pin_equal(x, lx.index(c), y, ly.index(c))
    size = {c: d for lt, t in ((lx, x), (ly, y)) for c, d in zip(lt, t.dims)}
    batch = [c for c in lx if c in ly and c in keep]
    summed = [c for c in lx if c in ly and c not in keep]
    left = [c for c in lx if c not in ly]
    right = [c for c in ly if c not in lx]
    same = all(dict(zip(lx, x.dims))[c] == dict(zip(ly, y.dims))[c] for c in batch + summed)
    groups = [_merged([size[c] for c in g]) if g else 1 for g in (left, summed, right)]
    if not same or None in groups:  # broadcast multiply and sum
        order = batch + left + summed + right
        xe = _expand_dims(x, lx, order)
        ye = _expand_dims(y, ly, order)
        prod = apply("mul", [xe, ye])
        return _sum_letters(prod, "".join(order), summed)
    nb = [size[c] for c in batch]
    xm = _reshape(_permute(x, lx, "".join(batch + left + summed)), [*nb, groups[0], groups[1]])
    ym = _reshape(_permute(y, ly, "".join(batch + summed + right)), [*nb, groups[1], groups[2]])
    out = _reshape(apply("matmul", [xm, ym]), [*nb, *[size[c] for c in left + right]])
    return out, "".join(batch + left + right)


def _expand_dims(x, letters, order):
    """x's letters permuted into ``order``, with size-1 dims for the letters x lacks."""
    x = _permute(x, letters, "".join(c for c in order if c in letters))
    shape = []
    dims = iter(x.dims)
    for c in order:
        shape.append(next(dims) if c in letters else 1)
    return _reshape(x, shape) if shape != list(x.dims) else x


@torchsymbol(method=False, functional=False)
def einsum(equation, *operands):
    """Einstein summation, as ``torch.einsum`` (``'...'``, implicit output, repeated letters
    for diagonals; operands as arguments or one list).

    >>> import graphc as gc
    >>> gc.einsum("ij,jk->ik", gc.ones(2, 3), gc.ones(3, 4)).shape
    (2, 4)
    >>> gc.einsum("ii", gc.eye(3)).item()
    3.0
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    subs, output = _parse(equation, operands)
    xs = []
    for i, (x, letters) in enumerate(zip(operands, subs)):
        x, letters = _take_diagonals(x, letters)
        others = "".join(subs[:i] + subs[i + 1:]) + output
        x, letters = _sum_letters(x, letters, [c for c in letters if c not in others])
        xs.append((x, letters))
    x, lx = xs[0]
    for k in range(1, len(xs)):
        y, ly = xs[k]
        keep = output + "".join(s for _, s in xs[k + 1:])
        x, lx = _contract(x, lx, y, ly, keep)
    x, lx = _sum_letters(x, lx, [c for c in lx if c not in output])
    return _permute(x, lx, output)


def _in_place_variants():
    from ..core.inplace import _arithmetic

    for name in ("addmm", "addbmm", "baddbmm", "addmv", "addr"):
        _arithmetic(name, lambda x, *args, _n=name, **kwargs: getattr(x, _n)(*args, **kwargs))


_in_place_variants()  # Tensor.addmm_, ...: PyTorch's in-place forms
