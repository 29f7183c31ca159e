"""``torch.fft``: discrete Fourier transforms over numpy.fft / cupy.fft (ir/ops/fft.py).

Results follow PyTorch: a float32 (or integer) input gives complex64, float64 gives
complex128; ``irfft*`` and ``hfft*`` give the real dtype. ``norm`` is "backward" (default:
the inverse transforms scale by 1/n), "ortho" or "forward". ``n=`` / ``s=`` cut or zero-pad
the input along the transformed dims first (-1 in ``s`` keeps a dim's size).

>>> import graphc as gc
>>> x = gc.tensor([1.0, 2.0, 3.0, 4.0])
>>> gc.fft.fft(x).numpy().tolist()
[(10+0j), (-2+2j), (-2+0j), (-2-2j)]
>>> gc.fft.irfft(gc.fft.rfft(x), n=4).numpy().tolist()
[1.0, 2.0, 3.0, 4.0]
"""
from __future__ import annotations

from .core.dispatch import apply
from .ir.errors import ShapeError
from .ir.types import DType

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
           "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftshift", "ifftshift", "fftfreq", "rfftfreq"]

_DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _norm(norm):
    norm = "backward" if norm is None else norm
    if norm not in _DUAL:
        raise ShapeError(f"Invalid normalization mode: {norm!r} (one of 'backward', 'ortho', 'forward')")
    return norm


def _as_transformable(x, real: bool, what: str):
    """Integers and bools compute in float32, as PyTorch; ``real``: complex input refused."""
    if x.dtype.is_complex:
        if real:
            raise ShapeError(f"{what} expects a real input tensor, but got {x.dtype.name}")
        return x
    return x if x.dtype.is_float else x.float()


def _plan(x, s, dim, what: str):
    """The transformed dims (non-negative) and the size each is cut/padded to (PyTorch's rule:
    ``dim`` None with ``s`` given means the last ``len(s)`` dims; both None: every dim)."""
    rank = x.ndim
    if dim is None:
        dims = list(range(rank - len(s), rank)) if s is not None else list(range(rank))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
    if s is not None and len(s) != len(dims):
        raise ShapeError(f"{what}: when given, dim and shape arguments must have the same length "
                         f"(s={tuple(s)}, dim={tuple(dims)})")
    out = []
    for d in dims:
        if not -max(rank, 1) <= d < max(rank, 1) or rank == 0:
            raise ShapeError(f"{what}: dim {d} is out of range for a tensor of rank {rank}")
        out.append(d % rank)
    if len(set(out)) != len(out):
        raise ShapeError(f"{what}: dims must be unique, got {tuple(dims)}")
    sizes = [x.dims[d] if s is None or s[i] == -1 else int(s[i]) for i, d in enumerate(out)]
    for size in sizes:
        if isinstance(size, int) and size < 1:
            raise ShapeError(f"{what}: Invalid number of data points ({size}) specified")
    return out, sizes


def _one(n, dim):
    return (None if n is None else (n,)), (dim,)


def _c2c(x, s, dim, norm, inverse, what):
    x = _as_transformable(x, False, what)
    dims, sizes = _plan(x, s, dim, what)
    return apply("fft_c2c", [x], {"dims": dims, "sizes": sizes, "norm": _norm(norm), "inverse": inverse})


def _r2c(x, s, dim, norm, what):
    x = _as_transformable(x, True, what)
    dims, sizes = _plan(x, s, dim, what)
    return apply("fft_r2c", [x], {"dims": dims, "sizes": sizes, "norm": _norm(norm)})


def _c2r(x, s, dim, norm, what):
    """Output sizes: ``s``, else the input's with the last dim ``2 * (m - 1)``."""
    x = _as_transformable(x, False, what)
    dims, sizes = _plan(x, s, dim, what)
    if s is None or s[-1] == -1:
        m = x.dims[dims[-1]]
        if not isinstance(m, int):
            raise ShapeError(f"{what}: the last transformed dim is symbolic ({m}); pass its output length (n= or s=)")
        sizes[-1] = 2 * (m - 1)
        if sizes[-1] < 1:
            raise ShapeError(f"{what}: Invalid number of data points ({sizes[-1]}) specified")
    return apply("fft_c2r", [x], {"dims": dims, "sizes": sizes, "norm": _norm(norm)})


def fft(input, n=None, dim=-1, norm=None):
    """The 1-D discrete Fourier transform along ``dim``.

    >>> import graphc as gc
    >>> gc.fft.fft(gc.tensor([1.0, 0.0, 0.0, 0.0])).numpy().tolist()
    [(1+0j), (1+0j), (1+0j), (1+0j)]
    """
    return _c2c(input, *_one(n, dim), norm, False, "fft.fft")


def ifft(input, n=None, dim=-1, norm=None):
    """The 1-D inverse discrete Fourier transform along ``dim``.

    >>> import graphc as gc
    >>> gc.fft.ifft(gc.tensor([4.0, 0.0, 0.0, 0.0])).numpy().tolist()
    [(1+0j), (1+0j), (1+0j), (1+0j)]
    """
    return _c2c(input, *_one(n, dim), norm, True, "fft.ifft")


def fft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-D discrete Fourier transform over ``dim``.

    >>> import graphc as gc
    >>> gc.fft.fft2(gc.ones(2, 2)).numpy().real.tolist()
    [[4.0, 0.0], [0.0, 0.0]]
    """
    return _c2c(input, s, dim, norm, False, "fft.fft2")


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-D inverse discrete Fourier transform over ``dim``.

    >>> import graphc as gc
    >>> gc.fft.ifft2(gc.ones(2, 2)).numpy().real.tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    return _c2c(input, s, dim, norm, True, "fft.ifft2")


def fftn(input, s=None, dim=None, norm=None):
    """The N-D discrete Fourier transform (every dim by default).

    >>> import graphc as gc
    >>> gc.fft.fftn(gc.ones(2, 2, 2)).numpy().real.sum().item()
    8.0
    """
    return _c2c(input, s, dim, norm, False, "fft.fftn")


def ifftn(input, s=None, dim=None, norm=None):
    """The N-D inverse discrete Fourier transform (every dim by default).

    >>> import graphc as gc
    >>> gc.fft.ifftn(gc.ones(2, 2, 2)).numpy().real.sum().item()
    1.0
    """
    return _c2c(input, s, dim, norm, True, "fft.ifftn")


def rfft(input, n=None, dim=-1, norm=None):
    """The 1-D transform of a real input: the ``n // 2 + 1`` non-negative frequencies.

    >>> import graphc as gc
    >>> gc.fft.rfft(gc.tensor([1.0, 2.0, 3.0, 4.0])).numpy().tolist()
    [(10+0j), (-2+2j), (-2+0j)]
    """
    return _r2c(input, *_one(n, dim), norm, "fft.rfft")


def irfft(input, n=None, dim=-1, norm=None):
    """The inverse of :func:`rfft`: a real signal of length ``n`` (default ``2 * (m - 1)``).

    >>> import graphc as gc
    >>> gc.fft.irfft(gc.tensor([4.0, 0.0, 0.0])).numpy().tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    return _c2r(input, *_one(n, dim), norm, "fft.irfft")


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-D transform of a real input, the last dim one-sided.

    >>> import graphc as gc
    >>> gc.fft.rfft2(gc.ones(2, 4)).shape
    (2, 3)
    """
    return _r2c(input, s, dim, norm, "fft.rfft2")


def irfft2(input, s=None, dim=(-2, -1), norm=None):
    """The inverse of :func:`rfft2`.

    >>> import graphc as gc
    >>> gc.fft.irfft2(gc.fft.rfft2(gc.ones(2, 4))).numpy().tolist()
    [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    """
    return _c2r(input, s, dim, norm, "fft.irfft2")


def rfftn(input, s=None, dim=None, norm=None):
    """The N-D transform of a real input, the last transformed dim one-sided.

    >>> import graphc as gc
    >>> gc.fft.rfftn(gc.ones(2, 3, 4)).shape
    (2, 3, 3)
    """
    return _r2c(input, s, dim, norm, "fft.rfftn")


def irfftn(input, s=None, dim=None, norm=None):
    """The inverse of :func:`rfftn`.

    >>> import graphc as gc
    >>> gc.fft.irfftn(gc.fft.rfftn(gc.ones(2, 4))).shape
    (2, 4)
    """
    return _c2r(input, s, dim, norm, "fft.irfftn")


def hfft(input, n=None, dim=-1, norm=None):
    """The transform of a Hermitian-symmetric signal given by its one-sided half: real.

    >>> import graphc as gc
    >>> gc.fft.hfft(gc.tensor([1.0, 0.0, 0.0])).numpy().tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    return hfftn(input, *_one(n, dim), norm)


def ihfft(input, n=None, dim=-1, norm=None):
    """The inverse of :func:`hfft`: the one-sided half of a real signal's inverse transform.

    >>> import graphc as gc
    >>> gc.fft.ihfft(gc.tensor([1.0, 2.0, 3.0, 4.0])).imag.numpy().tolist() == [0.0, -0.5, 0.0]
    True
    """
    return ihfftn(input, *_one(n, dim), norm)


def hfft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-D :func:`hfft`.

    >>> import graphc as gc
    >>> gc.fft.hfft2(gc.ones(2, 3)).shape
    (2, 4)
    """
    return hfftn(input, s, dim, norm)


def ihfft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-D :func:`ihfft`.

    >>> import graphc as gc
    >>> gc.fft.ihfft2(gc.ones(2, 4)).shape
    (2, 3)
    """
    return ihfftn(input, s, dim, norm)


def hfftn(input, s=None, dim=None, norm=None):
    """The N-D :func:`hfft`: ``irfftn`` of the conjugate with the dual normalization.

    >>> import graphc as gc
    >>> gc.fft.hfftn(gc.ones(2, 3)).shape
    (2, 4)
    """
    x = _as_transformable(input, False, "fft.hfftn")
    if x.dtype.is_complex:
        x = apply("conj", [x])
    return _c2r(x, s, dim, _DUAL[_norm(norm)], "fft.hfftn")


def ihfftn(input, s=None, dim=None, norm=None):
    """The N-D :func:`ihfft`: the conjugate of ``rfftn`` with the dual normalization.

    >>> import graphc as gc
    >>> gc.fft.ihfftn(gc.ones(2, 4)).shape
    (2, 3)
    """
    return apply("conj", [_r2c(input, s, dim, _DUAL[_norm(norm)], "fft.ihfftn")])


def _shift(input, dim, inverse):
    rank = input.ndim
    dims = list(range(rank)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    for d in dims:
        if not -max(rank, 1) <= d < max(rank, 1):
            raise ShapeError(f"fftshift: dim {d} is out of range for a tensor of rank {rank}")
    return apply("fft_shift", [input], {"dims": [d % max(rank, 1) for d in dims], "inverse": inverse})


def fftshift(input, dim=None):
    """Roll each of ``dim`` (every dim by default) by half its size: frequency 0 to the middle.

    >>> import graphc as gc
    >>> gc.fft.fftshift(gc.arange(5)).numpy().tolist()
    [3, 4, 0, 1, 2]
    """
    return _shift(input, dim, False)


def ifftshift(input, dim=None):
    """The inverse of :func:`fftshift`.

    >>> import graphc as gc
    >>> gc.fft.ifftshift(gc.tensor([3, 4, 0, 1, 2])).numpy().tolist()
    [0, 1, 2, 3, 4]
    """
    return _shift(input, dim, True)


def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The sample frequencies of a length-``n`` transform: ``[0, 1, ..., -1] / (d * n)``.

    >>> import graphc as gc
    >>> gc.fft.fftfreq(4).numpy().tolist()
    [0.0, 0.25, -0.5, -0.25]
    """
    from .ops.creation import arange

    k = arange(int(n), dtype=DType.float32 if dtype is None else dtype, device=device)
    out = ifftshift(k - (int(n) // 2)) / (float(d) * int(n))
    return out.requires_grad_(requires_grad) if requires_grad else out


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The sample frequencies of a length-``n`` :func:`rfft`: ``[0, 1, ..., n // 2] / (d * n)``.

    >>> import graphc as gc
    >>> gc.fft.rfftfreq(4).numpy().tolist()
    [0.0, 0.25, 0.5]
    """
    from .ops.creation import arange

    out = arange(int(n) // 2 + 1, dtype=DType.float32 if dtype is None else dtype, device=device) / (float(d) * int(n))
    return out.requires_grad_(requires_grad) if requires_grad else out
