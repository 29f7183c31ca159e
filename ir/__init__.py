"""graphc's intermediate representation: types, values, nodes, graphs, the op registry,
the text printer and the verifier. Imports nothing else from graphc."""
from . import ops  # noqa: F401  (registers every op)
from .builder import Builder
from .errors import DeviceError, GraphcError, PlanFormatError, ShapeError, TraceError, VerifyError
from .graph import Graph, Node, Value
from .printer import format_graph, format_node
from .registry import REGISTRY, Attr, OpDef, get_op, register
from .types import BATCH, DType, TensorType
from .verify import verify

__all__ = [
    "BATCH", "Attr", "Builder", "DType", "DeviceError", "Graph", "GraphcError", "Node", "OpDef",
    "PlanFormatError", "REGISTRY", "ShapeError", "TensorType", "TraceError", "Value", "VerifyError",
    "format_graph", "format_node", "get_op", "register", "verify",
]
