"""ONNX form of graphc's pooling ops (graphc/ir/ops/pool.py): ``max_pool2d`` -> MaxPool (pads,
dilations, ceil_mode), ``avg_pool2d`` -> AveragePool (count_include_pad, ceil_mode;
``divisor_override`` as AveragePool times ``k*k / divisor`` where every window is whole),
``max_pool2d_indices`` -> MaxPool's Indices output modulo ``H * W`` (ONNX counts over the whole
tensor, PyTorch within each plane), ``adaptive_max_pool2d`` (+ ``_indices``) -> GlobalMaxPool or,
where the bins tile the input, a MaxPool, and ``max_unpool2d`` -> ScatterElements into zeros of
``(N, C, H * W)``. The composites (instance norm, LRN, PReLU, SELU, Mish, LP pooling, ...) are
written as the ops they are made of."""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError
from .export_fill import shape_tensor


def _ints(values) -> list:
    return [int(v) for v in values]


def _ceil_grows(node) -> bool:
    """Whether ceil_mode adds a last window that floor would drop (then it is partial)."""
    a = node.attrs
    if not a.get("ceil_mode"):
        return False
    in_hw, out_hw = node.inputs[0].type.shape[2:], node.outputs[0].type.shape[2:]
    for size, o, k, s, p, d in zip(in_hw, out_hw, a["kernel_size"], a["stride"], a["padding"],
                                   a.get("dilation", (1, 1))):
        if (size + 2 * p - d * (k - 1) - 1) // s + 1 != o:
            return True
    return False


def _window(node) -> dict:
    a = node.attrs
    ph, pw = _ints(a["padding"])
    attrs = {"kernel_shape": _ints(a["kernel_size"]), "strides": _ints(a["stride"]), "pads": [ph, pw, ph, pw]}
    if a.get("ceil_mode"):
        attrs["ceil_mode"] = 1
    if "dilation" in a:
        attrs["dilations"] = _ints(a["dilation"])
    return attrs


def write_max_pool(w, node, ins, out) -> None:
    w.node("MaxPool", ins, [out], node.meta, **_window(node))


def write_avg_pool(w, node, ins, out) -> None:
    a = node.attrs
    divisor = a.get("divisor_override")
    if divisor is None:
        w.node("AveragePool", ins, [out], node.meta, count_include_pad=int(a["count_include_pad"]), **_window(node))
        return
    if _ceil_grows(node):
        raise GraphcError("ONNX export: avg_pool2d with divisor_override and a partial ceil_mode window has no "
                          "ONNX form", node.location())
    kh, kw = _ints(a["kernel_size"])
    mean = w.fresh("window_mean")
    w.node("AveragePool", ins, [mean], node.meta, count_include_pad=1, **_window(node))
    scale = np.array(kh * kw / divisor, node.outputs[0].type.dtype.numpy)
    w.node("Mul", [mean, w.constant(scale, "divisor_scale")], [out], node.meta)


def _plane_indices(w, node, full: str, out: str, plane: int) -> None:
    """ONNX's index over the whole (N, C, H, W) tensor -> PyTorch's within each plane."""
    w.node("Mod", [full, w.constant(np.array(plane, np.int64), "plane")], [out], node.meta)


def write_max_pool_indices(w, node, ins, out) -> None:
    h, width = node.inputs[0].type.shape[2:]
    values, full = w.fresh("pooled"), w.fresh("flat_indices")
    w.node("MaxPool", ins, [values, full], node.meta, **_window(node))
    _plane_indices(w, node, full, out, int(h) * int(width))


def _adaptive_window(node) -> dict | None:
    """MaxPool's attrs when the adaptive bins tile the input (each size divides), else None."""
    (h, width), (oh, ow) = node.inputs[0].type.shape[2:], node.attrs["output_size"]
    if h % oh or width % ow:
        return None
    return {"kernel_shape": [h // oh, width // ow], "strides": [h // oh, width // ow]}


def write_adaptive_max_pool(w, node, ins, out) -> None:
    if list(node.attrs["output_size"]) == [1, 1]:
        w.node("GlobalMaxPool", ins, [out], node.meta)
        return
    window = _adaptive_window(node)
    if window is None:
        raise GraphcError(f"ONNX export: adaptive_max_pool2d from {tuple(node.inputs[0].type.shape[2:])} to "
                          f"{tuple(node.attrs['output_size'])}: the bins overlap, which no ONNX pooling op expresses "
                          "(sizes that divide export as MaxPool)", node.location())
    w.node("MaxPool", ins, [out], node.meta, **window)


def write_adaptive_max_pool_indices(w, node, ins, out) -> None:
    window = _adaptive_window(node)
    if window is None:
        raise GraphcError("ONNX export: adaptive_max_pool2d indices over overlapping bins have no ONNX form",
                          node.location())
    h, width = node.inputs[0].type.shape[2:]
    values, full = w.fresh("pooled"), w.fresh("flat_indices")
    w.node("MaxPool", ins, [values, full], node.meta, **window)
    _plane_indices(w, node, full, out, int(h) * int(width))


def write_max_unpool(w, node, ins, out) -> None:
    n, c, h, width = node.outputs[0].type.shape
    flat = w.constant(np.array([0, 0, -1], np.int64), "planes")
    x_flat, idx_flat, zeros, scattered = (w.fresh(b) for b in ("values", "indices", "zeros", "scattered"))
    w.node("Reshape", [ins[0], flat], [x_flat], node.meta)
    w.node("Reshape", [ins[1], flat], [idx_flat], node.meta)
    value = w.onnx.numpy_helper.from_array(np.zeros(1, node.outputs[0].type.dtype.numpy), "value")
    w.node("ConstantOfShape", [shape_tensor(w, node, [n, c, int(h) * int(width)])], [zeros], node.meta, value=value)
    w.node("ScatterElements", [zeros, idx_flat, x_flat], [scattered], node.meta, axis=2)
    w.node("Reshape", [scattered, w.constant(np.array([0, 0, h, width], np.int64), "unpooled")], [out], node.meta)


VISION_WRITERS = {
    "max_pool2d": write_max_pool, "avg_pool2d": write_avg_pool, "max_pool2d_indices": write_max_pool_indices,
    "adaptive_max_pool2d": write_adaptive_max_pool, "adaptive_max_pool2d_indices": write_adaptive_max_pool_indices,
    "max_unpool2d": write_max_unpool,
}
