"""Fourier-transform and complex-part kernels (ir/ops/fft.py) over ``xp.fft`` (numpy.fft,
cupy.fft: one API). numpy's transforms compute in double precision; the result is cast to the
node's dtype (complex64 for float32 input, as PyTorch)."""
from __future__ import annotations

from .base import writes_out


def _axes(spec):
    rank = spec.in_types[0].rank
    return tuple(d % rank for d in spec.attrs["dims"])


def _finish(dtype):
    def cast(y, out):
        if out is None:
            return y.astype(dtype, copy=False)
        out[...] = y
        return out
    return cast


def _c2c(xp, spec):
    axes = _axes(spec)
    shape = spec.out_types[0].shape
    sizes = tuple(shape[d] for d in axes)
    norm, transform = spec.attrs["norm"], xp.fft.ifftn if spec.attrs["inverse"] else xp.fft.fftn
    finish = _finish(spec.out_types[0].dtype.numpy)
    return writes_out(lambda x, out=None: finish(transform(x, s=sizes, axes=axes, norm=norm), out))


def _r2c(xp, spec):
    axes = _axes(spec)
    shape = spec.out_types[0].shape
    sizes = tuple(shape[d] for d in axes[:-1]) + (int(spec.attrs["sizes"][-1]),)
    norm = spec.attrs["norm"]
    finish = _finish(spec.out_types[0].dtype.numpy)
    return writes_out(lambda x, out=None: finish(xp.fft.rfftn(x, s=sizes, axes=axes, norm=norm), out))


def _c2r(xp, spec):
    axes = _axes(spec)
    shape = spec.out_types[0].shape
    sizes = tuple(shape[d] for d in axes)
    norm = spec.attrs["norm"]
    finish = _finish(spec.out_types[0].dtype.numpy)
    return writes_out(lambda x, out=None: finish(xp.fft.irfftn(x, s=sizes, axes=axes, norm=norm), out))


def _resize(xp, spec):
    """Cut, then zero-pad: the output is written whole (zeros first, then the kept block)."""
    src, dst = spec.in_types[0].shape, spec.out_types[0].shape
    keep = tuple(slice(0, min(a, b)) for a, b in zip(src, dst))
    dtype = spec.out_types[0].dtype.numpy

    def run(x, out=None):
        if out is None:
            out = xp.zeros(dst, dtype)
        else:
            out[...] = 0
        out[keep] = x[keep]
        return out
    return writes_out(run)


def _shift(xp, spec):
    axes = _axes(spec)
    shift = xp.fft.ifftshift if spec.attrs["inverse"] else xp.fft.fftshift
    return lambda x: shift(x, axes=axes).copy(order="C")


def _real(xp, spec):
    dtype = spec.out_types[0].dtype.numpy
    return lambda x: x.real.astype(dtype, order="C")


def _imag(xp, spec):
    dtype = spec.out_types[0].dtype.numpy
    return lambda x: x.imag.astype(dtype, order="C")


def _abs(xp, spec):
    dtype = spec.out_types[0].dtype.numpy
    return writes_out(lambda x, out=None: xp.abs(x, out=out) if out is not None else xp.abs(x).astype(dtype, copy=False))


def _conj(xp, spec):
    if spec.in_types[0].dtype.is_complex:
        return writes_out(lambda x, out=None: xp.conjugate(x, out=out))

    def copy(x, out=None):  # a real tensor is its own conjugate (numpy has no conjugate of bools)
        if out is None:
            return x.copy(order="C")
        out[...] = x
        return out
    return writes_out(copy)


def _make_complex(xp, spec):
    shape, dtype = spec.out_types[0].shape, spec.out_types[0].dtype.numpy

    def run(re, im, out=None):
        if out is None:
            out = xp.empty(shape, dtype)
        out.real[...] = re
        out.imag[...] = im
        return out
    return writes_out(run)


KERNELS = {"fft_c2c": _c2c, "fft_r2c": _r2c, "fft_c2r": _c2r, "fft_resize": _resize, "fft_shift": _shift,
           "real": _real, "imag": _imag, "complex_abs": _abs, "conj": _conj, "make_complex": _make_complex}
