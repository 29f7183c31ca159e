"""Readers of ONNX's DFT and STFT (see ``readers`` for the contract), as graphc's ``gc.fft``.

ONNX holds complex signals as a trailing dim of 2 (real, imaginary) and real ones as a trailing
dim of 1. DFT: ``axis`` (an attribute before opset 20, an input from 20, default -2 counting that
trailing dim), ``dft_length`` (zero-padded or cropped, as numpy's ``n``), ``onesided`` (the first
n//2 + 1 bins; with ``inverse``, an inverse real FFT of one-sided bins, of default length
2 * (bins - 1)), as onnx's reference. STFT: frames of ``frame_length`` every ``frame_step``
samples, times the window, each transformed; a real signal may be one-sided.
"""
from __future__ import annotations

import numpy as np

import graphc as gc  # the torch namespace: its functions are the composites read here (composite.py)

from .composite import composing
from .shape_readers import _rank, _shape


def _complex(v):
    """A (..., 1) real or (..., 2) complex ONNX signal as a graphc tensor without that dim."""
    if v.shape[-1] == 1:
        return v.squeeze(-1), False
    if v.shape[-1] != 2:
        raise ValueError(f"the last dim of an ONNX signal is 1 (real) or 2 (complex), got {v.shape[-1]}")
    return gc.complex(v[..., 0], v[..., 1]), True


def _onnx_signal(y, like):
    """Back to ONNX's layout, in the input's float type."""
    out = gc.view_as_real(y) if y.dtype.is_complex else y.unsqueeze(-1)
    return out.cast(like.name)


def _transform(signal, is_complex: bool, n: int, axis: int, inverse: bool, onesided: bool):
    if inverse and onesided:
        wide = "complex128" if signal.dtype.name == "float64" else "complex64"
        return gc.fft.irfft(signal if is_complex else signal.cast(wide), n=n, dim=axis)
    if inverse:
        return gc.fft.ifft(signal, n=n, dim=axis)
    out = gc.fft.fft(signal, n=n, dim=axis)
    return out[(slice(None),) * axis + (slice(0, n // 2 + 1),)] if onesided else out


def _dft(r, args):
    attrs = r.attrs()
    x = args[0]
    length_arg = args[1] if len(args) > 1 else None
    if r.version >= 20:
        axis_arg = args[2] if len(args) > 2 else None
        axis = -2 if axis_arg is None else int(np.asarray(r.static(axis_arg, "DFT's axis")).reshape(-1)[0])
    else:
        axis = int(attrs.get("axis", 1))
    rank = _rank(x)
    axis %= rank
    if axis == rank - 1:
        raise r.error("DFT along the trailing (real, imaginary) dim")
    inverse, onesided = bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))
    size = _shape(x)[axis]
    if length_arg is not None:
        n = int(np.asarray(r.static(length_arg, "DFT's dft_length")).reshape(-1)[0])
    elif not isinstance(size, int):
        raise r.error(f"DFT along the symbolic dim {size}")
    else:
        n = 2 * (size - 1) if inverse and onesided else size
    with composing(r) as t:
        v = t(x)
        signal, is_complex = _complex(v)
        return [t.value(_onnx_signal(_transform(signal, is_complex, n, axis, inverse, onesided), v.dtype))]


def _stft(r, args):
    x, step, window, frame_length = (list(args) + [None, None])[:4]
    onesided = bool(r.attrs().get("onesided", 1))
    step = int(np.asarray(r.static(step, "STFT's frame_step")).reshape(-1)[0])
    if frame_length is not None:
        frame = int(np.asarray(r.static(frame_length, "STFT's frame_length")).reshape(-1)[0])
    elif window is not None:
        frame = _shape(window)[0]
    else:
        raise r.error("STFT needs a window or a frame_length")
    length = _shape(x)[1]
    if not isinstance(length, int):
        raise r.error(f"STFT of a signal of symbolic length {length}")
    frames = (length - frame) // step + 1
    index = np.arange(frames)[:, None] * step + np.arange(frame)[None, :]
    with composing(r) as t:
        v = t(x)
        signal, is_complex = _complex(v)
        if onesided and is_complex:
            raise r.error("STFT with onesided=1 of a complex signal; ONNX's one-sided STFT takes real ones")
        framed = signal[:, gc.from_numpy(index)]  # (batch, frames, frame_length)
        if window is not None:
            framed = framed * t(window).cast(framed.dtype.name if is_complex else v.dtype.name)
        return [t.value(_onnx_signal(_transform(framed, is_complex, frame, 2, False, onesided), v.dtype))]


SPECTRAL_READERS = {"DFT": _dft, "STFT": _stft}
