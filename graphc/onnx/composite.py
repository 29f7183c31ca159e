"""Readers written with graphc's own functions: ``composing(r)`` traces ``gc.*`` calls into the
graph being imported, so an ONNX op that PyTorch also has (ReduceProd is ``gc.prod``, Trilu is
``gc.triu``/``gc.tril``, NegativeLogLikelihoodLoss is ``F.nll_loss``) is read as that function's
composite of registry ops, with the same numerics the op table tests, instead of a second
hand-written composition.

>>> import numpy as np, onnx.helper as h
>>> from graphc.onnx.importer import import_model
>>> node = h.make_node("ReduceProd", ["x"], ["y"], keepdims=0)
>>> m = h.make_model(h.make_graph([node], "g", [h.make_tensor_value_info("x", 1, [2, 3])],
...                               [h.make_tensor_value_info("y", 1, [])]))
>>> float(import_model(m)(np.array([[1, 2, 3], [4, 5, 6]], np.float32)))
720.0
"""
from __future__ import annotations

import contextlib

import numpy as np

from ..core.symint import SymInt
from ..core.tensor import Tensor
from ..core.tracer import Tracer, active
from ..ir.graph import Value
from ..ir.types import bind_dim, dim_symbols


class _ReaderTrace(Tracer):
    """A trace that records into the graph reader's graph, with the ONNX node's location."""

    def __init__(self, reader):
        super().__init__(reader.where)
        self.graph, self.builder, self.reader = reader.graph, reader.builder, reader

    def current_meta(self) -> dict:
        return dict(self.reader.meta)

    def example_shape(self, ttype) -> tuple:
        """``.shape`` of a traced value: a symbolic dim (the batch "N", any dim_param) is a
        ``SymInt`` of example size 1, which reshapes and ``ndim`` use symbolically; any use of it
        as a number is refused (``fix_size``): an imported plan holds for every size."""
        return tuple(d if isinstance(d, int) else SymInt(bind_dim(d, {n: 1 for n in dim_symbols(d)}), d, self)
                     for d in ttype.shape)

    def fix_size(self, dim) -> None:
        raise self.reader.error(f"reading this op uses the symbolic dim {dim!r} as a number; graphc keeps it "
                                "symbolic in an imported plan")

    def fix_batch(self) -> None:
        self.fix_size("N")


class _Composer:
    def __init__(self, reader):
        self.reader = reader
        self.trace = _ReaderTrace(reader)

    def __call__(self, x) -> Tensor:
        """A traced Tensor for one reader argument (a graph Value or an array known at import)."""
        return Tensor(_value=self.reader.value(x), _tracer=self.trace)

    def value(self, t):
        """The graph Value of a traced result (an array or number stays as it is)."""
        if isinstance(t, Tensor):
            return t._value
        if isinstance(t, (Value, np.ndarray)):
            return t
        return np.asarray(t)


@contextlib.contextmanager
def composing(reader):
    """``with composing(r) as t:`` ``t(x)`` is ``x`` as a traced Tensor, ``t.value(y)`` the Value
    of a result; graphc functions called in the block record into the imported graph."""
    composer = _Composer(reader)
    with active(composer.trace):
        yield composer
