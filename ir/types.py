"""Symbolic dims and tensor types (the dtypes are ``ir/dtypes.py``'s, re-exported here).

A dim is an ``int`` or a symbolic string: ``N`` (the batch size), a symbol a user declared
dynamic (``T``, ``H``), or a product of those and an int (flattening gives ``"N*64"``).
Internally a dim is the monomial ``coef * prod(symbol**power)``; these helpers convert,
do arithmetic and bind symbols to sizes.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from .dtypes import DType, promote  # noqa: F401  (re-exported: ir.types is where callers look)
from .errors import ShapeError

BATCH = "N"


# ---- symbolic dims -------------------------------------------------------------
# A symbolic dim is a monomial: a product of symbols (``N``, the batch; ``T``, ``H``: dims a
# user declared dynamic) and a positive integer, written ``"N"``, ``"N*64"``, ``"N*T*3"``:
# all that reshape and flatten need. A binding gives each symbol its size at run time.
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def is_symbol(name) -> bool:
    """Whether ``name`` can name a symbolic dim (an identifier)."""
    return isinstance(name, str) and bool(_SYMBOL.match(name))


def dim_terms(d) -> tuple[int, tuple]:
    """``64 -> (64, ())``, ``"N*T*64" -> (64, (("N", 1), ("T", 1)))`` (symbols in canonical order)."""
    if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
        return int(d), ()
    if not isinstance(d, str):
        raise ShapeError(f"bad dim {d!r}: expected int or symbolic string")
    return _parse_dim(d)


@functools.lru_cache(maxsize=4096)  # a graph repeats few distinct dims; parsing them dominated binding
def _parse_dim(d: str) -> tuple[int, tuple]:
    coef, powers = 1, {}
    for part in d.split("*"):
        part = part.strip()
        if part.isdigit():
            coef *= int(part)
        elif is_symbol(part):
            powers[part] = powers.get(part, 0) + 1
        else:
            raise ShapeError(f"bad symbolic dim {d!r}")
    return coef, tuple(sorted(powers.items(), key=_symbol_order))


def _symbol_order(item):
    return (item[0] != BATCH, item[0])  # N first, then by name


def terms_dim(coef: int, powers) -> object:
    """Inverse of :func:`dim_terms`."""
    names = [name for name, power in sorted(powers, key=_symbol_order) for _ in range(power)]
    if not names:
        return int(coef)
    text = "*".join(names)
    return text if coef == 1 else f"{text}*{coef}"


def dim_symbols(d) -> set:
    return {name for name, _ in dim_terms(d)[1]}


def dim_poly(d) -> tuple[int, int]:
    """``64 -> (64, 0)``, ``"N" -> (1, 1)``, ``"N*64" -> (64, 1)``: a dim that depends on the
    batch size only (a ShapeError for any other symbol)."""
    coef, powers = dim_terms(d)
    other = [name for name, _ in powers if name != BATCH]
    if other:
        raise ShapeError(f"dim {d!r} depends on {', '.join(other)}, not only on the batch size {BATCH}")
    return coef, dict(powers).get(BATCH, 0)


def poly_dim(coef: int, power: int):
    """Inverse of :func:`dim_poly`: ``(64, 1) -> "N*64"``, ``(5, 0) -> 5``."""
    return terms_dim(coef, ((BATCH, power),) if power else ())


def dim_mul(a, b):
    ca, pa = dim_terms(a)
    cb, pb = dim_terms(b)
    powers = dict(pa)
    for name, power in pb:
        powers[name] = powers.get(name, 0) + power
    return terms_dim(ca * cb, powers.items())


def dim_div(a, b):
    """Exact division of dims, or None when it does not divide."""
    ca, pa = dim_terms(a)
    cb, pb = dim_terms(b)
    powers = dict(pa)
    for name, power in pb:
        powers[name] = powers.get(name, 0) - power
    if cb == 0 or ca % cb or any(p < 0 for p in powers.values()):
        return None
    return terms_dim(ca // cb, [(k, p) for k, p in powers.items() if p])


def numel(shape) -> object:
    out = 1
    for d in shape:
        out = dim_mul(out, d)
    return out


def is_static(d) -> bool:
    return not dim_terms(d)[1]


def as_binding(n) -> dict:
    """A binding as ``{symbol: size}``: an int binds the batch symbol ``N``; a dict or a tuple
    of (symbol, size) pairs (the hashable form plans cache programs by) binds each symbol."""
    if isinstance(n, dict):
        return n
    if isinstance(n, tuple):
        return dict(n)
    return {BATCH: n}


def binding_of(symbolic, concrete) -> dict:
    """``{symbol: size}`` read off shapes: each dim of ``symbolic`` (shapes that may hold
    symbols) made of one symbol, to the first power, gives that symbol's size in the matching
    dim of ``concrete`` (``"N*64"`` at 640 gives N=10)."""
    out = {}
    for shape, actual in zip(symbolic, concrete):
        for d, n in zip(shape, actual):
            coef, powers = dim_terms(d)
            if len(powers) == 1 and powers[0][1] == 1 and coef and powers[0][0] not in out:
                out[powers[0][0]] = int(n) // coef
    return out


def bind_dim(d, n) -> int:
    coef, powers = dim_terms(d)
    if not powers:
        return coef
    values = as_binding(n)
    out = coef
    for name, power in powers:
        if name not in values:
            raise ShapeError(f"dim {d!r}: no size for its symbol {name}")
        out *= values[name] ** power
    return out


@dataclass(frozen=True)
class TensorType:
    """Shape (ints and symbolic dims) plus dtype, e.g. ``f32[N,128]``.

    >>> str(TensorType(("N", 128), DType.float32))
    'f32[N,128]'
    """

    shape: tuple
    dtype: DType

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(d if isinstance(d, str) else int(d) for d in self.shape))
        object.__setattr__(self, "dtype", DType.from_any(self.dtype))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return all(is_static(d) for d in self.shape)

    def bind(self, n) -> "TensorType":
        """The concrete type at batch size ``n`` (or at a binding of several symbols, see
        :func:`as_binding`)."""
        return TensorType(tuple(bind_dim(d, n) for d in self.shape), self.dtype)

    def with_shape(self, shape) -> "TensorType":
        return TensorType(tuple(shape), self.dtype)

    def with_dtype(self, dtype) -> "TensorType":
        return TensorType(self.shape, dtype)

    def __str__(self) -> str:
        return f"{self.dtype.short}[{','.join(str(d) for d in self.shape)}]"
