"""``conv3d`` and ``conv_transpose3d`` (``F.x`` and ``gc.x``) written on the 2-D kernels: a 3-D
convolution is the sum over the kernel's depth taps ``kd`` of 2-D convolutions of the depth
slices ``kd * dilation + d * stride`` (the depth folded into the batch), and a transposed one
the sum over ``kd`` of 2-D transposed convolutions of every input depth slice, each placed at
depth ``d * stride + kd * dilation`` (the depth zero-stuffed by the stride, then shifted), and
cropped by the padding. Gradients come from the 2-D ops' rules; plans keep the batch symbolic.
"""
from __future__ import annotations

from ..ir.errors import GraphcError, ShapeError
from .functions_conv import conv_transpose2d, ntuple
from .functions_nn import conv2d
from .surface import torchsymbol

_F_AND_TOP = {"method": False}


def _batched5(input, what):
    if input.ndim == 5:
        return input, False
    if input.ndim == 4:
        return input.unsqueeze(0), True
    raise ShapeError(f"{what}: expected a 4-D (unbatched) or 5-D input, got {input.ndim}-D {tuple(input.shape)}")


def _pad(x, amounts):
    """``F.pad`` (constant 0) of the last dims, amounts as F.pad's (negative crops)."""
    from ..nn.functional import pad
    return pad(x, tuple(amounts)) if any(amounts) else x


def _same_padding(kernel, dilation):
    """'same': (left, right) per dim, the larger half on the right, as PyTorch."""
    totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
    return [(t // 2, t - t // 2) for t in totals]


@torchsymbol(**_F_AND_TOP)
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution over (N, C, D, H, W) (or unbatched (C, D, H, W)) with weight
    (out, C/groups, kd, kh, kw); ``padding`` ints or 'same' / 'valid'.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.conv3d(gc.ones(1, 2, 3, 4, 5), gc.ones(6, 2, 2, 2, 2), padding="same").shape
    (1, 6, 3, 4, 5)
    """
    x, added = _batched5(input, "conv3d")
    if weight.ndim != 5:
        raise ShapeError(f"conv3d: weight must be 5-D (out, in/groups, kd, kh, kw), got {tuple(weight.shape)}")
    kernel = tuple(int(k) for k in weight.shape[2:])
    s, dil = ntuple(stride, 3, "stride", 1), ntuple(dilation, 3, "dilation", 1)
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise GraphcError(f"conv3d: padding must be 'same', 'valid' or ints, got {padding!r}")
        if padding == "same" and s != (1, 1, 1):
            raise GraphcError("conv3d: padding='same' is not supported for strided convolutions")
        sides = _same_padding(kernel, dil) if padding == "same" else [(0, 0)] * 3
    else:
        sides = [(p, p) for p in ntuple(padding, 3, "padding")]
    x = _pad(x, [a for lr in reversed(sides) for a in lr])
    n, c, depth, h, w = x.shape
    out_depth = (depth - dil[0] * (kernel[0] - 1) - 1) // s[0] + 1
    if out_depth < 1:
        raise ShapeError(f"conv3d: the kernel's depth {kernel[0]} (dilation {dil[0]}) exceeds the padded input depth "
                         f"{depth}")
    total = None
    for kd in range(kernel[0]):
        start = kd * dil[0]
        taps = x[:, :, start:start + (out_depth - 1) * s[0] + 1:s[0]]  # (N, C, Do, H, W)
        planes = taps.transpose(1, 2).reshape(-1, c, h, w)
        y = conv2d(planes, weight[:, :, kd], None, s[1:], 0, dil[1:], groups)
        total = y if total is None else total + y
    out = total.reshape(n, out_depth, *total.shape[1:]).transpose(1, 2)
    if bias is not None:
        out = out + bias.reshape(-1, 1, 1, 1)
    return out.squeeze(0) if added else out


@torchsymbol(**_F_AND_TOP)
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """3-D transposed convolution over (N, C_in, D, H, W) (or unbatched) with weight
    (C_in, out/groups, kd, kh, kw).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.conv_transpose3d(gc.ones(1, 2, 3, 3, 3), gc.ones(2, 4, 2, 2, 2), stride=2).shape
    (1, 4, 6, 6, 6)
    """
    x, added = _batched5(input, "conv_transpose3d")
    if weight.ndim != 5:
        raise ShapeError(f"conv_transpose3d: weight must be 5-D (in, out/groups, kd, kh, kw), got "
                         f"{tuple(weight.shape)}")
    s, dil = ntuple(stride, 3, "stride", 1), ntuple(dilation, 3, "dilation", 1)
    p, op = ntuple(padding, 3, "padding"), ntuple(output_padding, 3, "output_padding")
    n, c, depth, h, w = x.shape
    kernel = int(weight.shape[2])
    full = (depth - 1) * s[0] + dil[0] * (kernel - 1) + 1
    planes = x.transpose(1, 2).reshape(-1, c, h, w)  # (N*D, C, H, W)
    total = None
    for kd in range(kernel):
        y = conv_transpose2d(planes, weight[:, :, kd], None, s[1:], p[1:], op[1:], groups, dil[1:])
        y = y.reshape(n, depth, *y.shape[1:])  # (N, D, O, Ho, Wo)
        if s[0] > 1:  # zero-stuff the depth: each slice followed by stride - 1 zero slices
            y = _pad(y.unsqueeze(2), (0, 0) * 3 + (0, s[0] - 1)).reshape(n, depth * s[0], *y.shape[2:])
            y = y[:, :(depth - 1) * s[0] + 1]
        shift = kd * dil[0]
        y = _pad(y, (0, 0) * 3 + (shift, full - shift - ((depth - 1) * s[0] + 1)))
        total = y if total is None else total + y
    out = _pad(total, (0, 0) * 3 + (-p[0], op[0] - p[0])).transpose(1, 2)  # crop the padding, add output_padding
    if bias is not None:
        out = out + bias.reshape(-1, 1, 1, 1)
    return out.squeeze(0) if added else out
