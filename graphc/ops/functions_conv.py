"""Transposed convolutions and sliding blocks: ``F.conv_transpose1d/2d`` (the
``conv_transpose2d`` primitive; 1-D runs on a height-1 image), ``F.unfold`` / ``F.fold`` (the
``im2col`` / ``col2im`` primitives), and :func:`padded_conv`, a conv module's forward with
PyTorch's padding rules (non-zero modes as F.pad, then the conv).
"""
from __future__ import annotations

from ..core.dispatch import apply
from ..ir.errors import GraphcError, ShapeError
from .surface import torchsymbol

_F_ONLY = {"method": False, "top": False}
_F_AND_TOP = {"method": False}


def ntuple(value, n: int, what: str, minimum: int = 0) -> tuple:
    """An int or an n-sequence of ints as an n-tuple, each at least ``minimum``."""
    values = (value,) * n if isinstance(value, int) and not isinstance(value, bool) else tuple(value)
    if len(values) != n or not all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum for v in values):
        raise GraphcError(f"{what} must be an int >= {minimum} or a tuple of {n} such ints, got {value!r}")
    return values


@torchsymbol(**_F_AND_TOP)
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-D transposed convolution over (N, C_in, H, W) (or unbatched (C_in, H, W)) with weight
    (C_in, C_out/groups, kH, kW): the gradient of ``conv2d`` with respect to its input, as
    PyTorch's. Output size ``(H - 1) * stride - 2 * padding + dilation * (kH - 1) +
    output_padding + 1``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.conv_transpose2d(gc.ones(1, 4, 8, 8), gc.ones(4, 2, 4, 4), stride=2, padding=1).shape
    (1, 2, 16, 16)
    """
    if input.ndim == 3:
        return conv_transpose2d(input.unsqueeze(0), weight, bias, stride, padding, output_padding, groups,
                                dilation).squeeze(0)
    attrs = {"stride": ntuple(stride, 2, "stride", 1), "padding": ntuple(padding, 2, "padding"),
             "output_padding": ntuple(output_padding, 2, "output_padding"),
             "dilation": ntuple(dilation, 2, "dilation", 1), "groups": groups}
    return apply("conv_transpose2d", [input, weight] + ([bias] if bias is not None else []), attrs)


@torchsymbol(**_F_AND_TOP)
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """1-D transposed convolution over (N, C_in, L) (or unbatched (C_in, L)) with weight
    (C_in, C_out/groups, k): ``conv_transpose2d`` on a height-1 image.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.conv_transpose1d(gc.ones(2, 3, 5), gc.ones(3, 4, 3), stride=2).shape
    (2, 4, 11)
    """
    if input.ndim == 2:
        return conv_transpose1d(input.unsqueeze(0), weight, bias, stride, padding, output_padding, groups,
                                dilation).squeeze(0)
    if input.ndim != 3 or weight.ndim != 3:
        raise ShapeError(f"conv_transpose1d expects a (N, C, L) input and a (C_in, C_out/groups, k) weight, got "
                         f"{tuple(input.shape)} and {tuple(weight.shape)}")
    one = lambda v, what, low=0: (1 if what in ("stride", "dilation") else 0, ntuple(v, 1, what, low)[0])  # noqa: E731
    out = conv_transpose2d(input.unsqueeze(2), weight.unsqueeze(2), bias, one(stride, "stride", 1),
                           one(padding, "padding"), one(output_padding, "output_padding"), groups,
                           one(dilation, "dilation", 1))
    return out.squeeze(2)


def _fold_attrs(kernel_size, dilation, padding, stride) -> dict:
    return {"kernel_size": ntuple(kernel_size, 2, "kernel_size", 1), "dilation": ntuple(dilation, 2, "dilation", 1),
            "padding": ntuple(padding, 2, "padding"), "stride": ntuple(stride, 2, "stride", 1)}


@torchsymbol(**_F_ONLY)
def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding blocks (im2col): (N, C, H, W) -> (N, C * kH * kW, L), L the number of blocks
    (unbatched (C, H, W) -> (C * kH * kW, L)), as PyTorch's ``F.unfold``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.unfold(gc.ones(2, 3, 4, 5), kernel_size=(2, 3)).shape
    (2, 18, 9)
    """
    if input.ndim == 3:
        return unfold(input.unsqueeze(0), kernel_size, dilation, padding, stride).squeeze(0)
    if input.ndim != 4:
        raise ShapeError(f"F.unfold expects a 3-D or 4-D input, got shape {tuple(input.shape)}")
    return apply("im2col", [input], _fold_attrs(kernel_size, dilation, padding, stride))


@torchsymbol(**_F_ONLY)
def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sum sliding blocks back into an image (col2im): (N, C * kH * kW, L) -> (N, C, *output_size)
    (unbatched (C * kH * kW, L) -> (C, *output_size)), F.unfold's adjoint, as PyTorch's ``F.fold``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.fold(F.unfold(gc.ones(1, 1, 3, 3), 2), (3, 3), 2).numpy()[0, 0].tolist()
    [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    if input.ndim == 2:
        return fold(input.unsqueeze(0), output_size, kernel_size, dilation, padding, stride).squeeze(0)
    if input.ndim != 3:
        raise ShapeError(f"F.fold expects a 2-D or 3-D input, got shape {tuple(input.shape)}")
    attrs = {**_fold_attrs(kernel_size, dilation, padding, stride), "output_size": ntuple(output_size, 2, "output_size", 1)}
    return apply("col2im", [input], attrs)


# ---- a conv module's padding ---------------------------------------------------------------

def _slice(x, dim: int, start, stop, step=1):
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, stop, step)
    return x[tuple(index)]


def conv_module_pads(name: str, padding, kernel, stride, dilation) -> list:
    """PyTorch's ``_reversed_padding_repeated_twice`` of a conv module: (left, right) per
    spatial dim from the last; 'same' splits ``dilation * (kernel - 1)`` with the extra one on
    the right, and needs stride 1."""
    n = len(kernel)
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise GraphcError(f"{name}: invalid padding string {padding!r}, should be one of 'valid', 'same'")
        if padding == "same" and any(s != 1 for s in stride):
            raise GraphcError(f"{name}: padding='same' is not supported for strided convolutions")
        out = [0, 0] * n
        if padding == "same":
            for d, k, i in zip(dilation, kernel, range(n - 1, -1, -1)):
                total = d * (k - 1)
                out[2 * i], out[2 * i + 1] = total // 2, total - total // 2
        return out
    return [p for p in reversed(padding) for _ in range(2)]


def padded_conv(conv, pad, x, weight, bias, stride, padding, dilation, groups, mode: str, pads):
    """A conv module's forward: ``mode`` other than 'zeros' pads explicitly with ``pad``
    (F.pad; ``pads`` from :func:`conv_module_pads`) and convolves unpadded, as PyTorch does; an
    uneven zero 'same' convolves with the larger side on both ends and drops the first output
    row of that dim."""
    n = len(stride)
    if mode != "zeros":
        return conv(pad(x, pads, mode), weight, bias, stride, 0 if n == 1 else (0,) * n, dilation, groups)
    if not isinstance(padding, str):
        return conv(x, weight, bias, stride, padding, dilation, groups)
    lefts = [pads[2 * (n - 1 - i)] for i in range(n)]
    rights = [pads[2 * (n - 1 - i) + 1] for i in range(n)]
    out = conv(x, weight, bias, stride, tuple(rights), dilation, groups)
    for i in range(n):
        if rights[i] != lefts[i]:
            out = _slice(out, out.ndim - n + i, 1, None)
    return out
