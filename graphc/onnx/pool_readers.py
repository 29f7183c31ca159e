"""Pooling of any rank and padding, as onnx's reference pools (see ``readers`` for the contract).

``vision_readers`` reads the common case, a 1-D or 2-D window with the same padding on both
sides of each dim, as graphc's ``max_pool2d`` / ``avg_pool2d`` (PyTorch's kernels). The rest
comes here: 3-D windows, asymmetric padding (``auto_pad`` SAME_UPPER/SAME_LOWER), average and
Lp pooling with dilations, and max pooling of integers. It is the reference's own algorithm over
a padded input: one strided slice per kernel offset, combined by max or sum, so every window is
exactly the reference's.

The reference's rules, kept here: the output size is ``(in + pads - dilation*(k-1) - 1) / stride
+ 1``, rounded up with ``ceil_mode`` unless the last window would start past the padded input;
the extra cells ceil mode needs are added half before and half after (its ``extra_pad // 2``)
and never counted; an average divides by the window's cells inside the input, or inside the
padded input with ``count_include_pad=1``; Lp pooling is ``(sum |x|^p)^(1/p)`` with padding 0.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

import graphc as gc  # the torch namespace: its functions are the composites read here (composite.py)

from .composite import composing
from .shape_readers import _rank, _shape


def window_pads(r, attrs: dict, spatial: list, kernel: list, strides: list, dilations: list) -> list:
    """The begin-then-end pads from ``pads`` or ``auto_pad`` (SAME_UPPER puts the odd cell at the end)."""
    auto = attrs.get("auto_pad", "NOTSET")
    rank = len(kernel)
    if auto in ("NOTSET", ""):
        return [int(p) for p in attrs.get("pads", [0] * 2 * rank)]
    if auto == "VALID":
        return [0] * 2 * rank
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise r.error(f"auto_pad={auto!r}; ONNX's are NOTSET, VALID, SAME_UPPER and SAME_LOWER")
    total = [max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
             for n, k, s, d in zip(spatial, kernel, strides, dilations)]
    small, large = [t // 2 for t in total], [t - t // 2 for t in total]
    return small + large if auto == "SAME_UPPER" else large + small


def torch_pad_amounts(begin: list, end: list) -> list:
    """ONNX's begin and end pads per spatial dim as F.pad's amounts, which start from the last dim."""
    amounts = []
    for b, e in zip(reversed(begin), reversed(end)):
        amounts += [b, e]
    return amounts


def _layout(r, attrs: dict, x) -> dict:
    spatial = list(_shape(x)[2:])
    if not all(isinstance(n, int) for n in spatial):
        raise r.error(f"pooling over symbolic spatial dims {spatial}; graphc needs them static")
    rank = len(spatial)
    kernel = [int(k) for k in attrs["kernel_shape"]]
    strides = [int(s) for s in attrs.get("strides", [1] * rank)]
    dilations = [int(d) for d in attrs.get("dilations", [1] * rank)]
    pads = window_pads(r, attrs, spatial, kernel, strides, dilations)
    ceil = bool(attrs.get("ceil_mode", 0)) and attrs.get("auto_pad", "NOTSET") in ("NOTSET", "")
    out, begin, end = [], [], []
    for i, (n, k, s, d) in enumerate(zip(spatial, kernel, strides, dilations)):
        span = n + pads[i] + pads[rank + i] - d * (k - 1) - 1
        size = (-(-span // s) if ceil else span // s) + 1
        if ceil and (size - 1) * s >= n + pads[i]:  # the last window must start inside
            size -= 1
        if size <= 0:
            raise r.error(f"a pooling window of {k} (dilation {d}) is larger than the padded input ({n})")
        extra = max((size - 1) * s + (k - 1) * d + 1 - n - pads[i] - pads[rank + i], 0)
        out.append(size)
        begin.append(pads[i] + extra // 2)
        end.append(pads[rank + i] + extra - extra // 2)
    return {"spatial": spatial, "kernel": kernel, "strides": strides, "dilations": dilations, "pads": pads,
            "out": out, "begin": begin, "end": end}


def _windows(t, x, lay: dict, fill, combine):
    """``combine`` over the kernel's offsets of the strided slices of ``x`` padded by ``fill``."""
    amounts = torch_pad_amounts(lay["begin"], lay["end"])
    padded = gc.nn.functional.pad(x, amounts, value=fill) if any(amounts) else x
    total = None
    for offsets in itertools.product(*(range(k) for k in lay["kernel"])):
        index = [slice(None), slice(None)]
        for o, d, s, size in zip(offsets, lay["dilations"], lay["strides"], lay["out"]):
            index.append(slice(o * d, o * d + (size - 1) * s + 1, s))
        part = padded[tuple(index)]
        total = part if total is None else combine(total, part)
    return total


def _counts(lay: dict, include_pad: bool) -> np.ndarray:
    """Per output cell, how many window cells the reference averages over. In the padded
    input's coordinates it counts cells below ``in + pads`` (ceil mode's extra cells at the end
    never count); of those, the input's own cells, or every cell with count_include_pad."""
    rank = len(lay["spatial"])
    count = np.ones(lay["out"], np.int64)
    for i in range(rank):
        limit = lay["spatial"][i] + lay["pads"][i] + lay["pads"][rank + i]
        starts = np.arange(lay["out"][i]) * lay["strides"][i]
        cells = starts[:, None] + np.arange(lay["kernel"][i])[None, :] * lay["dilations"][i]
        counted = cells < limit
        if not include_pad:
            counted &= (cells >= lay["begin"][i]) & (cells < lay["begin"][i] + lay["spatial"][i])
        count = count * counted.sum(axis=1).reshape([-1 if j == i else 1 for j in range(rank)])
    return count


def _lowest(dtype) -> float:
    return -math.inf if dtype.is_float else float(np.iinfo(dtype.numpy).min)


def general_pool(kind: str):
    """The reader of MaxPool / AveragePool / LpPool for any rank and padding."""
    def read(r, args):
        attrs = r.attrs()
        x = args[0]
        if _rank(x) < 3:
            raise r.error(f"{kind} of a rank-{_rank(x)} input; ONNX's pools (N, C, spatial...)")
        if kind == "MaxPool" and len([o for o in r.node.output if o]) > 1:
            raise r.error(f"MaxPool's Indices over a rank-{_rank(x)} input or asymmetric padding")
        lay = _layout(r, attrs, x)
        with composing(r) as t:
            v = t(x)
            if kind == "MaxPool":
                return [t.value(_windows(t, v, lay, _lowest(v.dtype), gc.maximum))]
            if not v.dtype.is_float:
                raise r.error(f"{kind} of {v.dtype.name}; ONNX's averages and Lp norms are of floats")
            if kind == "LpPool":
                p = float(attrs.get("p", 2))
                total = _windows(t, v.abs() ** p, lay, 0.0, gc.add)
                return [t.value(total ** (1.0 / p))]
            total = _windows(t, v, lay, 0.0, gc.add)
            counts = _counts(lay, bool(attrs.get("count_include_pad", 0))).astype(v.dtype.numpy)
            return [t.value(total / gc.from_numpy(counts))]
    return read


def needs_general_pool(r, attrs: dict, x, kind: str) -> bool:
    """Whether the 2-D kernels cannot pool this as the reference does."""
    if _rank(x) not in (3, 4):
        return True
    rank = _rank(x) - 2
    spatial = list(_shape(x)[2:])
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * rank))
    dilations = list(attrs.get("dilations", [1] * rank))
    if not all(isinstance(n, int) for n in spatial):
        return False  # the 2-D path says what it cannot do with symbolic spatial dims
    pads = window_pads(r, attrs, spatial, kernel, strides, dilations)
    if pads[:rank] != pads[rank:]:
        return True
    if kind != "MaxPool" and any(d != 1 for d in dilations):
        return True
    return kind == "MaxPool" and np.dtype(r.value(x).type.dtype.numpy).kind in "iu"
