"""Shapes read at run time for ONNX: ``full`` as a constant where its shape is static, else
``ConstantOfShape`` of a shape read off the graph inputs that carry its symbols (an LSTM's
zero initial state ``[layers, N, hidden]``); and the target of a reshape with several
symbolic dims (attention's ``[N, T, heads, head_dim]``)."""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError
from ..ir.types import dim_terms, is_static


def write_full(w, node, ins, out) -> None:
    attrs, ttype = node.attrs, node.outputs[0].type
    dtype = ttype.dtype.numpy
    if ttype.is_static:
        w.node("Identity", [w.constant(np.full(ttype.shape, attrs["value"], dtype), "full")], [out], node.meta)
        return
    shape = shape_tensor(w, node, ttype.shape)
    value = w.onnx.numpy_helper.from_array(np.array([attrs["value"]], dtype), "value")
    w.node("ConstantOfShape", [shape], [out], node.meta, value=value)


def shape_tensor(w, node, dims) -> str:
    """An int64 tensor holding ``dims`` at run time (symbols read off the graph inputs)."""
    shape = w.fresh("shape")
    w.node("Concat", [_dim(w, node, d) for d in dims], [shape], node.meta, axis=0)
    return shape


def _dim(w, node, d) -> str:
    """A 1-element int64 tensor holding dim ``d`` at run time."""
    if is_static(d):
        return w.constant(np.array([d], np.int64), "dim")
    coef, powers = dim_terms(d)
    factors = [_symbol(w, node, name) for name, power in powers for _ in range(power)]
    if coef != 1:
        factors.append(w.constant(np.array([coef], np.int64), "coef"))
    while len(factors) > 1:
        product = w.fresh("dim")
        w.node("Mul", factors[:2], [product], node.meta)
        factors = [product, *factors[2:]]
    return factors[0]


def _symbol(w, node, name: str) -> str:
    for value in w.graph.inputs:
        if name in value.type.shape:
            shape = w.fresh("input_shape")
            w.node("Shape", [w.name(value)], [shape], node.meta)
            size = w.fresh(name)
            w.node("Gather", [shape, w.constant(np.array([value.type.shape.index(name)], np.int64), "axis")], [size],
                   node.meta, axis=0)
            return size
    raise GraphcError(f"ONNX export: no graph input carries the symbolic dim {name} that full's shape needs",
                      node.location())
