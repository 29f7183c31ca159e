"""Antialiased resizing (``F.interpolate(..., antialias=True)`` for 'bilinear' and 'bicubic', and
``aten._upsample_bilinear2d_aa``): PyTorch's separable filter weights (ATen's
``_compute_weights_aa``), one constant (out, in) matrix per spatial dim as the other modes.
Downsampling widens the filter's support by the scale (a triangle for bilinear, Keys' cubic
with a = -0.5 for bicubic), so every input pixel under the output pixel's footprint counts;
the weights of each output are normalized to sum 1. graphc/nn/functional_resample.py applies
the matrices.
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError


def _triangle(x):
    return np.maximum(1.0 - np.abs(x), 0.0)


def _cubic(x, a=-0.5):
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


_FILTERS = {"bilinear": (_triangle, 2), "bicubic": (_cubic, 4)}


def antialias_matrix(mode, size_in, size_out, align_corners, scale_factor):
    """The (size_out, size_in) antialiasing matrix of one dim (``scale_factor``: the user's, or None).

    >>> from graphc.nn.functional_antialias import antialias_matrix
    >>> (antialias_matrix("bilinear", 4, 2, False, None) * 7).round(6).tolist()  # a triangle 2 pixels wide
    [[3.0, 3.0, 1.0, 0.0], [0.0, 1.0, 3.0, 3.0]]
    """
    if mode not in _FILTERS:
        raise GraphcError("Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D tensor "
                          f"as input (got mode {mode!r})")
    filt, interp_size = _FILTERS[mode]
    if align_corners:  # ATen's area_pixel_compute_scale
        scale = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    else:
        scale = 1.0 / scale_factor if scale_factor is not None and scale_factor > 0 else size_in / size_out
    support = interp_size * 0.5 * scale if scale >= 1.0 else interp_size * 0.5
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    m = np.zeros((size_out, size_in), np.float64)
    for i in range(size_out):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), size_in)
        w = filt((np.arange(lo, hi) - center + 0.5) * invscale)
        total = w.sum()
        m[i, lo:hi] = w / total if total != 0.0 else w
    return m
