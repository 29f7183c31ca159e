"""``F.grid_sample`` and ``F.affine_grid`` as composites: per-sample bilinear tent weights
max(0, 1 - |x - i|) along each axis and two contractions (zeros padding falls out: taps
outside the image have no weight), so gradients w.r.t. the input and the grid come from
autodiff and a compiled plan keeps the symbolic batch.

>>> import graphc as gc
>>> import graphc.nn.functional as F
>>> theta = gc.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
>>> grid = F.affine_grid(theta, (1, 1, 2, 2), align_corners=False)
>>> F.grid_sample(gc.ones(1, 1, 2, 2), grid, align_corners=False).shape
(1, 1, 2, 2)
"""
from __future__ import annotations

import numpy as np

from ..core.dispatch import apply
from ..ir.errors import GraphcError, ShapeError
from .functional_resample import _const

# ---- grid sampling -------------------------------------------------------------------------------

def _unnormalize(coord, size, align_corners):
    """[-1, 1] grid coordinates to pixel coordinates (PyTorch's ``grid_sampler_unnormalize``)."""
    if align_corners:
        return (coord + 1.0) * ((size - 1) / 2.0)
    return ((coord + 1.0) * size - 1.0) / 2.0


def _reflect(coord, twice_low, twice_high):
    """PyTorch's ``reflect_coordinates``: fold ``coord`` into [low, high] by mirroring."""
    if twice_low == twice_high:
        return coord * 0.0
    low, span = twice_low / 2.0, (twice_high - twice_low) / 2.0
    dist = (coord - low).abs()
    flips = (dist / span).floor()
    extra = dist - flips * span
    even = (flips - ((flips / 2.0).floor() * 2.0)) == 0.0
    return apply("where", [even, extra + low, (extra * -1.0) + (span + low)])


def _source(coord, size, padding_mode, align_corners):
    coord = _unnormalize(coord, size, align_corners)
    if padding_mode == "border":
        coord = coord.clamp(0.0, size - 1.0)
    elif padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else _reflect(coord, -1, 2 * size - 1)
        coord = coord.clamp(0.0, size - 1.0)
    return coord


def _tap_weights(coord, size, mode):
    """(N, P, size): each sample's weight on each pixel along one dim: the bilinear tent
    ``relu(1 - |coord - i|)`` (taps outside the image simply do not exist: zeros padding), or
    1 where ``round(coord) == i`` for nearest (half to even, as PyTorch's ``nearbyint``)."""
    from ..ops.creation import arange
    pixels = arange(float(size), dtype=coord.dtype) if str(coord.device) == "cpu" else \
        arange(float(size), dtype=coord.dtype).to(str(coord.device))
    coord = apply("reshape", [coord], {"shape": list(coord.dims) + [1]})
    if mode == "nearest":
        return apply("cast", [coord.round() == pixels], {"dtype": coord.dtype.name})
    return (1.0 - (coord - pixels).abs()).relu()


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample ``input`` (N, C, H, W) at ``grid`` (N, Ho, Wo, 2) locations (x, y in [-1, 1]),
    as PyTorch's ``F.grid_sample`` for 4-D input: ``mode`` 'bilinear' or 'nearest',
    ``padding_mode`` 'zeros', 'border' or 'reflection', ``align_corners`` (default False).
    Written as per-sample tap weights along x and y (the bilinear tent ``relu(1 - |x - i|)``)
    and two contractions, so gradients w.r.t. input and grid come from autodiff; the grid's
    gradient is PyTorch's except exactly at integer pixel coordinates (where the tent has a kink).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> image = gc.tensor([[[[0.0, 1.0], [2.0, 3.0]]]])
    >>> F.grid_sample(image, gc.tensor([[[[0.0, 0.0]]]]), align_corners=True).numpy()
    array([[[[1.5]]]], dtype=float32)
    """
    if mode not in ("bilinear", "nearest"):
        raise GraphcError(f"nn.functional.grid_sample(): expected mode to be 'bilinear' or 'nearest', but got: "
                          f"'{mode}'" + (" (bicubic is not supported by graphc)" if mode == "bicubic" else ""))
    if padding_mode not in ("zeros", "border", "reflection"):
        raise GraphcError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                          f"'reflection', but got: '{padding_mode}'")
    if input.ndim != 4 or grid.ndim != 4:
        raise GraphcError(f"F.grid_sample supports 4-D input and grid (graphc has no 5-D volumetric sampling); "
                          f"got input {input.ndim}-D and grid {grid.ndim}-D")
    n, c, h, w = input.dims
    _, ho, wo, two = grid.dims
    if two != 2:
        raise ShapeError(f"grid_sampler(): expected grid to have size 2 in last dimension, but got grid with sizes "
                         f"{list(grid.dims)}")
    if not all(isinstance(d, int) for d in (c, h, w, ho, wo)):
        raise GraphcError("F.grid_sample needs static channel and spatial sizes in a compiled graph")
    align_corners = bool(align_corners)
    points = apply("reshape", [grid], {"shape": [grid.dims[0], ho * wo, 2]})
    x = apply("slice", [points], {"slices": [[None, None, 1], [None, None, 1], [0, None, 1]], "drop": [2]})
    y = apply("slice", [points], {"slices": [[None, None, 1], [None, None, 1], [1, None, 1]], "drop": [2]})
    wx = _tap_weights(_source(x, w, padding_mode, align_corners), w, mode)  # (N, P, W)
    wy = _tap_weights(_source(y, h, padding_mode, align_corners), h, mode)  # (N, P, H)
    rows = apply("reshape", [input], {"shape": [n, c * h, w]})
    along_x = apply("matmul", [rows, apply("permute", [wx], {"perm": [0, 2, 1]})])  # (N, C*H, P)
    along_x = apply("reshape", [along_x], {"shape": [n, c, h, ho * wo]})
    weights_y = apply("reshape", [apply("permute", [wy], {"perm": [0, 2, 1]})], {"shape": [n, 1, h, ho * wo]})
    out = (along_x * weights_y).sum(dim=2)
    return apply("reshape", [out], {"shape": [n, c, ho, wo]})


def _base_grid(sizes, align_corners):
    """PyTorch's affine_grid base: per spatial dim ``linspace(-1, 1, size)`` (scaled by
    ``(size - 1) / size`` without align_corners), as rows (x, y[, z], 1) in x-fastest order."""
    axes = []
    for size in sizes:
        line = np.linspace(-1.0, 1.0, size) if size > 1 else np.zeros(1)
        axes.append(line if align_corners else line * (size - 1) / size)
    mesh = np.meshgrid(*axes, indexing="ij")  # sizes are (D,) H, W: x runs along the last dim
    cols = [m.reshape(-1) for m in mesh[::-1]]
    return np.stack(cols + [np.ones_like(cols[0])], axis=1)


def affine_grid(theta, size, align_corners=None):
    """Sampling grid of the affine maps ``theta`` (N, 2, 3) for ``size`` (N, C, H, W), or
    (N, 3, 4) for (N, C, D, H, W), as PyTorch's ``F.affine_grid``: one matmul of the constant
    base grid with ``theta`` transposed, so theta's gradient comes from autodiff.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> identity = gc.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    >>> F.affine_grid(identity, (1, 1, 2, 2), align_corners=True).numpy()[0, 0]
    array([[-1., -1.],
           [ 1., -1.]], dtype=float32)
    """
    size = list(size[:1]) + [int(s) for s in size[1:]]  # size[0] may be the traced batch size: left as it is
    align_corners = bool(align_corners)
    if len(size) not in (4, 5):
        raise GraphcError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                          f"respectively. Got size {size}.")
    spatial = len(size) - 2
    if theta.ndim != 3 or tuple(theta.dims[1:]) != (spatial, spatial + 1):
        raise GraphcError(f"Expected a batch of {spatial}D affine matrices of shape Nx{spatial}x{spatial + 1} for "
                          f"size {size}. Got {list(theta.dims)}.")
    if isinstance(theta.dims[0], int) and isinstance(size[0], int) and theta.dims[0] != size[0]:
        raise GraphcError(f"Expected a batch of {spatial}D affine matrices of shape Nx{spatial}x{spatial + 1} for "
                          f"size {size}. Got {list(theta.dims)}.")
    base = _const(theta, _base_grid(size[2:], align_corners))  # (P, spatial + 1)
    grid = apply("matmul", [base, apply("permute", [theta], {"perm": [0, 2, 1]})])  # (N, P, spatial)
    return apply("reshape", [grid], {"shape": [theta.dims[0]] + size[2:] + [spatial]})
