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

from ..core.tensor import Tensor
from ..core.tracer import Tracer, active
from ..ir.errors import show
from ..ir.graph import Value
from ..ir.types import BATCH, TensorType, dim_symbols


EXAMPLE_SIZE = 7  # what a symbolic dim reads as while composing; any use of it as a number is refused


class _ReaderTrace(Tracer):
    """A trace that records into the graph reader's graph, with the ONNX node's location.

    A symbolic dim (the batch ``N``, a named dynamic dim) is a ``SymInt`` here as in any trace,
    so ``x.reshape(x.shape[0], -1)`` keeps it symbolic; an import has no example size to bake
    in, so a function that uses one as a plain number (a comparison, ``range(n)``) is refused
    (``fix_size``) rather than tied to a made-up size."""

    def __init__(self, reader):
        super().__init__(reader.where)
        self.graph, self.builder, self.reader = reader.graph, reader.builder, reader
        self.batch_size = EXAMPLE_SIZE

    def current_meta(self) -> dict:
        return dict(self.reader.meta)

    def example_shape(self, ttype: TensorType) -> tuple:
        for d in ttype.shape:
            for name in () if isinstance(d, int) else dim_symbols(d):
                self.sizes.setdefault(name, EXAMPLE_SIZE)
        return super().example_shape(ttype)

    def fix_size(self, dim) -> None:
        raise self.reader.error(f"{show(self.reader.node.op_type)} would use the symbolic dim {dim} as a number; "
                                "graphc imports it for static sizes of that dim only")

    def fix_batch(self) -> None:
        self.fix_size(BATCH)


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
