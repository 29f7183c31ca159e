"""One reader per ONNX op: ``reader(r, args) -> [output, ...]``.

``r`` is the ``graph_reader.GraphReader`` reading the graph (``r.attrs()``,
``r.emit(op, inputs, attrs)``, ``r.static(x, what)``, ``r.error(message)``); ``args`` holds
one entry per ONNX input: a graph ``Value``, a numpy array known while importing
(initializers, constants, shapes), or None for an omitted optional input. Readers of shape
ops compute on known arrays directly, so ``Shape -> Gather -> Concat -> Reshape`` chains leave
no node behind; a shape may then hold the batch dim as the symbolic ``"N"`` (an object array).
"""
from __future__ import annotations

import numpy as np

from .conv_readers import CONV_READERS
from .elementwise_readers import ELEMENTWISE_READERS, scalar
from .norm_readers import NORM_READERS
from .reduce_readers import REDUCE_READERS
from .shape_readers import SHAPE_READERS, _known, _shape

# ---- linear algebra -----------------------------------------------------------------------------------
def _matmul(r, args):
    x, w = args
    if _known(x, w):
        if np.ndim(x) >= 2 and np.ndim(w) >= 2:  # with a 1-D operand the product is smaller than the inputs
            shape = np.broadcast_shapes(np.shape(x)[:-2], np.shape(w)[:-2]) + (np.shape(x)[-2], np.shape(w)[-1])
            r.allow(shape, np.result_type(x, w), "MatMul")
        return [np.matmul(x, w)]
    if _known(w) and np.ndim(w) == 2 and np.asarray(w).dtype.kind == "f":  # a weight: nn.Linear's own op
        return [r.emit("linear", [x, _transposed(r, w)])]
    return [r.emit("matmul", args)]


def _transposed(r, x):
    if _known(x):
        return r.name_like(np.ascontiguousarray(np.swapaxes(x, -1, -2)), x)
    return r.emit("permute", [x], {"perm": [1, 0]})


def _gemm(r, args):
    a, b, c = (list(args) + [None])[:3]
    attrs = r.attrs()
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if attrs.get("transA", 0):
        a = _transposed(r, a)
    out_features = _shape(b)[0 if attrs.get("transB", 0) else 1]
    if alpha == 1.0 and beta == 1.0 and (c is None or (_known(c) and np.size(c) == out_features)):
        weight = b if attrs.get("transB", 0) else _transposed(r, b)  # linear's weight is (out, in)
        bias = [] if c is None else [c if np.shape(c) == (out_features,) else np.reshape(c, (out_features,))]
        return [r.emit("linear", [a, weight, *bias])]
    product = r.emit("matmul", [a, _transposed(r, b) if attrs.get("transB", 0) else b])
    integer = product.type.dtype if not product.type.dtype.is_float else None
    if integer is not None and not (alpha.is_integer() and beta.is_integer()):
        # onnx's reference scales integer products by the float attrs in float64, then truncates
        product, c = (None if v is None else r.emit("cast", [v], {"dtype": "float64"}) for v in (product, c))
    if alpha != 1.0:
        product = r.emit("mul", [product, scalar(r, product, alpha)])
    if c is not None:
        product = r.emit("add", [product, r.emit("mul", [c, scalar(r, product, beta)]) if beta != 1.0 else c])
    if integer is not None and product.type.dtype != integer:
        product = r.emit("cast", [product], {"dtype": integer.name})
    return [product]


# the single-node readers, ONNX op type -> reader (tests/test_onnx_readers.py runs each one); the
# importer reads with importer.NODE_READERS, these and control_import's If, Loop and Scan
READERS = {
    **SHAPE_READERS, **ELEMENTWISE_READERS, **CONV_READERS, **NORM_READERS, **REDUCE_READERS,
    "MatMul": _matmul, "Gemm": _gemm,
}
