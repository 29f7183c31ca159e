"""Random sampling beyond ``rand``/``randn``/``normal_``/``uniform_`` (issue #34): ``randint``,
``randint_like``, ``normal`` with tensor parameters, ``bernoulli``, ``multinomial`` and the
in-place ``exponential_``, ``cauchy_``, ``geometric_``, ``log_normal_``, ``bernoulli_``.

Each is a transform of uniform or normal draws, so inside a compiled function it is a
``random`` node plus ordinary ops: fresh samples at every run of the plan, from the plan's
generator (seeded by ``gc.manual_seed``). The draws are not PyTorch's bit for bit (no library
shares another's generator stream); the distributions are the same.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.dispatch import apply
from ..core.inplace import _in_place, _need_float, _write
from ..core.tensor import Tensor
from ..ir.errors import GraphcError
from ..ir.types import DType
from ..random import generator as _generator, numpy_generator
from .creation import _draw, _draw_like, shape_args, tensor
from .surface import torchsymbol

_METHOD_ONLY = dict(top=False, functional=False)


def _uniform_like(t: Tensor, dtype=None) -> Tensor:
    return _draw_like(t, "uniform", dtype if dtype is not None else t.dtype, None)


def _sized(size) -> list:
    return shape_args(tuple(size) if isinstance(size, (list, tuple)) else (size,))


def randint(*args, size=None, dtype=None, device=None, requires_grad=False, generator=None, layout=None,
            pin_memory=False):
    """Integers drawn uniformly from ``[low, high)``: ``randint(high, size)`` or
    ``randint(low, high, size)``, int64 unless ``dtype`` says otherwise.

    >>> import graphc as gc
    >>> x = gc.randint(3, 7, (100,))
    >>> x.dtype, bool(gc.logical_and(x >= 3, x < 7).all())
    (<DType.int64: 'i64'>, True)
    """
    if size is None:
        *bounds, size = args
    else:
        bounds = list(args)
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
    if not int(low) < int(high):
        raise GraphcError(f"randint expects low < high, got low={low}, high={high}")
    dtype = DType.from_any(dtype) if dtype is not None else DType.int64
    if generator is not None:  # a gc.Generator's own stream: eager numbers
        draws = numpy_generator(generator).integers(int(low), int(high), tuple(int(d) for d in _sized(size)))
        return tensor(draws, dtype=dtype, device=device)
    return _integers(_draw(_sized(size), "uniform", DType.float64, device, False), int(low), int(high), dtype)


def randint_like(input: Tensor, low=0, high=None, *, dtype=None, device=None, memory_format=None,
                 requires_grad=False, generator=None):
    """``randint`` of ``input``'s shape (and dtype, unless ``dtype`` is given):
    ``randint_like(x, high)`` or ``randint_like(x, low, high)``.

    >>> import graphc as gc
    >>> gc.randint_like(gc.zeros(2, 3), 5).shape
    (2, 3)
    """
    if high is None:
        low, high = 0, low
    dtype = DType.from_any(dtype) if dtype is not None else input.dtype
    if generator is not None and input._tracer is None:
        return randint(low, high, tuple(input.shape), dtype=dtype, device=device, generator=generator)
    return _integers(_uniform_like(input, DType.float64), int(low), int(high), dtype)


def _integers(u: Tensor, low: int, high: int, dtype: DType) -> Tensor:
    # floor(u * n) is in [0, n) for u in [0, 1): float64 draws keep every integer reachable
    return ((u * (high - low)).floor() + low).cast(dtype)


def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
           pin_memory=False, requires_grad=False):
    """Samples of N(mean, std**2): ``mean`` and ``std`` tensors (broadcast together) or
    numbers with ``size``. Gradients flow to tensor ``mean`` and ``std`` (the
    reparameterization ``mean + std * eps``), as PyTorch's.

    >>> import graphc as gc
    >>> gc.normal(2.0, 0.5, size=(3, 4)).shape
    (3, 4)
    >>> gc.normal(gc.zeros(5), gc.ones(5)).shape
    (5,)
    """
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if not tensors:
        if size is None:
            raise GraphcError("normal(mean, std) with numbers needs size=")
        want = DType.from_any(dtype) if dtype is not None else DType.float32
        eps = _draw(_sized(size), "normal", want, device, False)
        return eps * float(std) + float(mean)
    if any(isinstance(s, (int, float)) and s < 0 for s in (std,)):
        raise GraphcError(f"normal expects std >= 0, got {std}")
    shape = apply("add", [apply("mul", [tensors[0], 0.0]), apply("mul", [tensors[-1], 0.0])])
    eps = _draw_like(shape, "normal", shape.dtype, None)
    return eps * std + mean


@torchsymbol(functional=False)
def bernoulli(input, p=None, *, generator=None, out=None):
    """0/1 samples, 1 with probability ``input`` (or ``p`` everywhere), in ``input``'s dtype.

    >>> import graphc as gc
    >>> x = gc.bernoulli(gc.full((1000,), 0.25))
    >>> 0.15 < float(x.mean()) < 0.35
    True
    """
    _need_float(input, "bernoulli")
    probs = input if p is None else float(p)
    # PyTorch's derivative of a draw is zero: the samples stay connected to ``input`` with it
    return apply("lt", [_uniform_like(input), probs]).cast(input.dtype) + apply("mul", [input, 0.0])


@torchsymbol(functional=False)
def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Indices drawn from the categories weighted by each row of ``input`` (1-D or 2-D,
    non-negative weights, not necessarily normalized); without ``replacement`` each index at
    most once per row (the Gumbel-top-k trick: the ``num_samples`` largest of
    ``log w - log(-log u)``).

    >>> import graphc as gc
    >>> gc.multinomial(gc.tensor([0.0, 1.0, 0.0]), 2, replacement=True).numpy().tolist()
    [1, 1]
    """
    if input.ndim not in (1, 2):
        raise GraphcError(f"multinomial expects a 1-D or 2-D tensor of weights, got {input.ndim}-D")
    categories = int(input.shape[-1])
    if not replacement and num_samples > categories:
        raise GraphcError(f"multinomial without replacement draws at most {categories} samples, got {num_samples}")
    weights = input.detach().cast(DType.float64)
    if not replacement:
        gumbel = -(-(_uniform_like(weights).clamp(min=1e-300)).log()).log()
        return (weights.log() + gumbel).topk(num_samples, dim=-1).indices
    cdf = weights.cumsum(-1)
    cdf = cdf / cdf[..., -1:]
    u = _uniform_like(cdf[..., :1].expand(*input.shape[:-1], num_samples))
    # the index is how many cumulative weights lie at or below the draw (kept below the count)
    below = apply("ge", [u.unsqueeze(-1), cdf.unsqueeze(-2)]).cast(DType.int64).sum(-1)
    return below.clamp(max=categories - 1)


# ---- in-place draws ---------------------------------------------------------------------------
def _fill_from_uniform(input, what, transform, sample):
    """``transform(u)`` of uniform draws inside a trace; numpy's ``sample(rng, shape)`` eagerly."""
    _need_float(input, what)
    return _in_place(input, what, (), lambda cur: transform(_uniform_like(cur)),
                     lambda: _write(input, ..., sample(_generator(), input.shape), what))


@torchsymbol(**_METHOD_ONLY)
def exponential_(input, lambd=1.0, *, generator=None):
    """Fill with Exp(lambd) samples; returns the tensor.

    >>> import graphc as gc
    >>> bool((gc.zeros(100).exponential_(2.0) >= 0).all())
    True
    """
    return _fill_from_uniform(input, "exponential_", lambda u: -(1.0 - u).log() / lambd,
                              lambda rng, shape: rng.exponential(1.0 / lambd, size=shape))


@torchsymbol(**_METHOD_ONLY)
def cauchy_(input, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy(median, sigma) samples; returns the tensor."""
    return _fill_from_uniform(input, "cauchy_", lambda u: ((u - 0.5) * math.pi).tan() * sigma + median,
                              lambda rng, shape: median + sigma * rng.standard_cauchy(size=shape))


@torchsymbol(**_METHOD_ONLY)
def geometric_(input, p, *, generator=None):
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    if not 0 < p < 1:
        raise GraphcError(f"geometric_ expects 0 < p < 1, got {p}")
    return _fill_from_uniform(input, "geometric_", lambda u: ((1.0 - u).log() / math.log1p(-p)).ceil().clamp(min=1),
                              lambda rng, shape: rng.geometric(p, size=shape))


@torchsymbol(**_METHOD_ONLY)
def log_normal_(input, mean=1.0, std=2.0, *, generator=None):
    """Fill with exp(N(mean, std**2)) samples; returns the tensor."""
    _need_float(input, "log_normal_")
    return _in_place(input, "log_normal_", (), lambda cur: (_draw_like(cur, "normal", cur.dtype, None) * std + mean).exp(),
                     lambda: _write(input, ..., _generator().lognormal(mean, std, size=input.shape), "log_normal_"))


@torchsymbol(**_METHOD_ONLY)
def bernoulli_(input, p=0.5, *, generator=None):
    """Fill with 0/1 samples, 1 with probability ``p`` (a number or a tensor); returns the tensor."""
    probs = p if isinstance(p, Tensor) else float(p)
    return _in_place(input, "bernoulli_", (), lambda cur: apply("lt", [_uniform_like(cur), probs]).cast(cur.dtype),
                     lambda: _write(input, ..., np.asarray(_generator().random(input.shape) < _host(p)), "bernoulli_"))


def _host(p):
    return p.numpy() if isinstance(p, Tensor) else p
