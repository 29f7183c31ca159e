"""Reading one ONNX graph into an ``ir.Graph``: :class:`GraphReader`, which turns each node
into graphc ops through the reader its table names for the node's op type, and the helpers it
and its subgraph reader (``control_import.BodyReader``) share: every TensorProto checked before
it becomes an array (:func:`tensor_array`), ONNX names cleaned into graphc value names.

This module imports no table of readers: the importer hands one in (``importer.NODE_READERS``),
so the readers (``readers``, ``control_import``) can build on it without an import circle.
"""
from __future__ import annotations

import math
import re

import numpy as np

from ..ir.builder import Builder
from ..ir.errors import GraphcError, PlanFormatError, ShapeError, clip, show
from ..ir.graph import Graph, Value, describe_location
from ..ir.types import BATCH, DType, TensorType, is_symbol
from .dtypes import DTYPES as _DTYPES, TYPED_FIELDS, stored_count, type_name
from .export import onnx_module
from .external import ExternalData
from .sequence_readers import IMPORT_TIME_VALUES, SEQUENCE_READERS
from .static_values import evaluate
from .versions import READ_DOMAINS, check_version, domain_opsets, reader_key



def default_opset(model) -> int | None:
    """The version of the default (``ai.onnx``) domain the model imports."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def check_tensor(tensor, where: str, what: str):
    """A tensor's element type must be one graphc holds and its dims non-negative; inline data
    must be exactly as large as the dims say. Returns the numpy dtype."""
    known = _DTYPES.get(tensor.data_type)
    if known is None:
        raise GraphcError(f"{where}: {what} has ONNX element type {type_name(tensor.data_type)}, which graphc "
                          "cannot hold (graphc holds the numeric types)")
    dtype = known.numpy
    if any(d < 0 for d in tensor.dims):
        raise GraphcError(f"{where}: {what} declares negative dims {list(tensor.dims)}")
    if is_external(tensor, where, what):
        return dtype  # checked against its data file by ExternalData.array
    count = int(np.prod(tensor.dims, dtype=object)) if tensor.dims else 1
    raw = tensor.HasField("raw_data")
    want = stored_count(tensor.data_type, count, raw, np.dtype(dtype).itemsize)
    have = len(tensor.raw_data) if raw else len(getattr(tensor, TYPED_FIELDS[tensor.data_type]))
    if have != want:
        raise GraphcError(f"{where}: {what} declares shape {list(tensor.dims)} ({want} "
                          f"{'bytes' if tensor.HasField('raw_data') else 'values'}) but holds {have}")
    return dtype


def is_external(tensor, where: str, what: str) -> bool:
    """Whether the tensor's data is in another file (data_location EXTERNAL, as onnx and
    onnxruntime decide); external_data entries without that marking are ambiguous, refused."""
    if tensor.data_location == 1:  # TensorProto.EXTERNAL
        return True
    if tensor.external_data:
        raise PlanFormatError(f"{where}: {what} has external data entries but is not marked as external data")
    return False


def tensor_array(onnx, tensor, where: str, what: str, external: ExternalData | None = None) -> np.ndarray:
    """The checked numpy array of a TensorProto; external data is read through ``external``
    (never through ``numpy_helper``, which would follow any path the file names)."""
    dtype = check_tensor(tensor, where, what)
    if is_external(tensor, where, what):
        if external is None:
            raise PlanFormatError(f"{where}: {what} keeps its data in another file, and this model was not "
                                  "read from a folder")
        return external.array(tensor, dtype, what)
    return np.array(onnx.numpy_helper.to_array(tensor))  # a writable copy


def _as_known(x):
    """A reader's output in one of two forms: a graph Value, or a numpy array. A shape holding
    the batch dim is an object array of ints and ``"N"`` (never numpy's fixed-width strings,
    which would turn the ints it is concatenated with into strings too); one without is int64."""
    if isinstance(x, (Value, *IMPORT_TIME_VALUES)):
        return x
    array = np.asarray(x)
    if array.dtype.kind == "U":
        array = array.astype(object)
    if array.dtype == object and not any(isinstance(d, str) for d in array.reshape(-1).tolist()):
        array = array.astype(np.int64)
    return array


def clean_name(name: str, fallback: str) -> str:
    """ONNX names may hold any characters (``onnx::Conv_12``, ``/conv1/Conv_output_0``);
    graphc value names keep letters, digits, ``.`` and ``_``."""
    cleaned = re.sub(r"[^A-Za-z0-9_.]+", "_", name).strip("_")
    return cleaned or fallback


class NodeAttrs(dict):
    """A node's attributes: a missing one that the op needs is a GraphcError naming it."""

    def __init__(self, error):
        super().__init__()
        self._error = error

    def __missing__(self, key):
        raise self._error(f"the node lacks the attribute {key!r}, which this op needs")


class GraphReader:
    """Translates one ONNX graph into an ``ir.Graph``, node by node, in file order; each node
    through ``readers[node.op_type]`` (``reader(self, args) -> outputs``; the importer's table
    is ``importer.NODE_READERS``)."""

    def __init__(self, model, filename: str, budget: int, *, readers: dict, folder: str | None = None,
                 bound: dict | None = None):
        self.readers = readers
        self.bound = dict(bound or {})  # ONNX input name -> the array it is specialized on (static_values)
        self.input_names: dict = {}  # ONNX input name -> its graph input's name
        self.onnx = onnx_module()
        self.model, self.where, self.budget = model, filename, budget
        self.external = None if folder is None else ExternalData(folder, filename, budget)
        self.opset = default_opset(model)
        self.opsets = domain_opsets(model)
        self.version = None  # the version of the op of the node being read (versions.op_version)
        self.graph = Graph(clean_name(model.graph.name, "onnx_model"))
        self.builder = Builder(self.graph)
        self.env: dict = {}  # ONNX value name -> graph Value or np.ndarray (known while importing)
        self.array_names: dict = {}  # id(array) -> (array, the initializer's name): constants keep it
        self.constants: dict = {}  # id(array) -> (array, its graph constant), made once however often it is used
        self.node = None
        self.meta: dict = {}
        self.graphc_made = model.producer_name == "graphc"
        self.scope = ""  # where a subgraph's nodes are: " in subgraph 'body'" (control_import.BodyReader)

    # ---- the graph's edges -------------------------------------------------------------
    def to_graph(self) -> Graph:
        onnx_graph = self.model.graph
        for tensor in onnx_graph.initializer:
            array = tensor_array(self.onnx, tensor, self.where, f"initializer {show(tensor.name)}",
                                 self.external)
            self.env[tensor.name] = array
            self.array_names[id(array)] = (array, tensor.name)
        for info in onnx_graph.input:
            if info.name in self.bound:  # a plan specialized on this input's value: a known array
                self.env[info.name] = self._bound_array(info)
            elif info.name not in self.env:  # old files list initializers as inputs too
                self._add_input(info)
        for index, node in enumerate(onnx_graph.node):
            self._read_node(index, node)
        names = []
        for info in onnx_graph.output:
            if info.name not in self.env:
                raise GraphcError(f"{self.where}: graph output {show(info.name)} is not computed by any node")
            if isinstance(self.env[info.name], IMPORT_TIME_VALUES):
                raise GraphcError(f"{self.where}: graph output {show(info.name)} is a sequence or an optional "
                                  "value; a graphc plan's outputs are tensors (concatenate a sequence in the model: "
                                  "ConcatFromSequence)")
            self.graph.outputs.append(self.value(self.env[info.name]))
            names.append(clean_name(info.name, f"output{len(names)}"))
        self.graph.output_names = names
        return self.graph

    def _add_input(self, info) -> None:
        kind = info.type.WhichOneof("value")
        tensor_type = info.type.tensor_type
        if kind != "tensor_type" or tensor_type.elem_type not in _DTYPES:
            raise GraphcError(f"{self.where}: input {show(info.name)} is not a tensor of a dtype graphc holds "
                              f"({kind}, {type_name(tensor_type.elem_type)})")
        dims = []
        named = [d.dim_param for d in tensor_type.shape.dim if not d.HasField("dim_value")]
        for axis, dim in enumerate(tensor_type.shape.dim):
            if dim.HasField("dim_value"):
                dims.append(int(dim.dim_value))
            elif axis == 0 and not (BATCH in named[1:] and is_symbol(dim.dim_param)):
                dims.append(BATCH)  # a named or unknown leading dim is the batch (unless N is named later)
            elif is_symbol(dim.dim_param) and len(dim.dim_param) <= 64:
                dims.append(dim.dim_param)  # a named dynamic dim: graphc's symbol of that name
            else:
                raise GraphcError(f"{self.where}: input {show(info.name)} has a dynamic dim {axis} "
                                  f"({clip(dim.dim_param or 'unnamed', 60)}) without a name graphc can use; graphc "
                                  "reads a named dim (an identifier) as a symbol, an unnamed one only as the leading "
                                  "batch dim")
        dtype = _DTYPES[tensor_type.elem_type]
        name = self.graph.unique_name(clean_name(info.name, "input"))
        self.env[info.name] = self.graph.add_input(Value(name, TensorType(tuple(dims), dtype)))
        self.input_names[info.name] = name
        self.builder.reserve(name)

    def _bound_array(self, info):
        array = np.asarray(self.bound[info.name])
        if info.type.tensor_type.elem_type in _DTYPES and array.dtype != _DTYPES[info.type.tensor_type.elem_type].numpy:
            raise ShapeError(f"input {show(info.name)}: expected {type_name(info.type.tensor_type.elem_type)}, got "
                             f"{array.dtype}")
        return array.copy()

    # ---- one node ----------------------------------------------------------------------
    def _read_node(self, index: int, node) -> None:
        self.node = node
        label = clip(node.name, 200) or f"{clip(node.op_type, 60)}_{index}"  # names from the file: cut short
        source = clip(node.doc_string, 200) if self.graphc_made and node.doc_string else \
            f"{self.where} node {index}{self.scope}"
        module = re.sub(r"__\d+$", "", label) if self.graphc_made else label  # the export's unique suffix
        self.meta = {"module": module, "module_type": clip(node.op_type, 60), "source": source}
        if node.domain not in READ_DOMAINS:
            raise self.error(f"op {show(node.op_type)} of domain {show(node.domain)} is not supported (graphc "
                             f"imports the domains {', '.join(repr(d) for d in READ_DOMAINS[1:])})")
        try:
            self.version = check_version(self.onnx, node, self.opsets)
        except ValueError as e:
            raise self.error(str(e)) from None
        reader = self.readers.get(reader_key(node.domain, node.op_type))
        if reader is None:
            raise self.error(f"ONNX op {show(node.op_type)}-{self.version} is not supported by graphc's importer")
        args = [self.lookup(name) if name else None for name in self._known_inputs(node)]
        if node.op_type not in SEQUENCE_READERS and any(isinstance(a, IMPORT_TIME_VALUES) for a in args):
            raise self.error(f"{show(node.op_type)} is given a sequence or an optional value; graphc reads them "
                             "with the Sequence* and Optional* ops, ConcatFromSequence and SplitToSequence")
        try:
            outputs = reader(self, args)
        except GraphcError as e:
            raise e.located(describe_location(self.meta)) from None
        except (ValueError, TypeError, IndexError, ArithmeticError, MemoryError) as e:  # a malformed node
            raise self.error(f"malformed {show(node.op_type)} node: {type(e).__name__}: {clip(e, 200)}") from None
        used = [name for name in node.output if name]
        if any(name for name in node.output[len(outputs):]):
            raise self.error(f"{show(node.op_type)} with {len(used)} outputs: graphc computes only the first "
                             f"{len(outputs)}")
        for name, out in zip(node.output, outputs):
            if not name:  # an optional output left out (LSTM's Y in ['', 'Y_h'])
                continue
            if name in self.env:
                raise self.error(f"value {show(name)} is computed twice (an ONNX graph assigns each name once)")
            self.env[name] = _as_known(out)

    def _known_inputs(self, node) -> list:
        for name in node.input:
            if name and not self.knows(name):
                raise self.error(f"input {show(name)} is used before any node computes it")
        return list(node.input)

    def knows(self, name: str) -> bool:
        return name in self.env

    def lookup(self, name: str):
        """The Value or known array an ONNX name stands for (a body reader also sees the
        enclosing graphs' names: ``control_import.BodyReader``)."""
        return self.env[name]

    def error(self, message: str) -> GraphcError:
        return GraphcError(f"{self.where}: {message}", describe_location(self.meta))

    # ---- helpers for readers -----------------------------------------------------------
    def attrs(self) -> dict:
        """The node's attributes as Python values (strings decoded, tensors as arrays); reading
        one the node lacks (``attrs["axis"]``) is a GraphcError naming it."""
        out = NodeAttrs(self.error)
        for attr in self.node.attribute:
            if attr.type == 5:  # GRAPH: a control-flow op's body, read by its reader (control_import)
                out[attr.name] = attr.g
                continue
            if attr.type == 10:  # GRAPHS: no default-domain op graphc reads takes a list of subgraphs
                raise self.error(f"attribute {show(attr.name)} holds a list of subgraphs, which graphc does not import")
            if attr.type in (4, 9):  # TENSOR, TENSORS
                tensors = [attr.t] if attr.type == 4 else list(attr.tensors)
                arrays = [tensor_array(self.onnx, t, self.where, f"attribute {show(attr.name)}", self.external)
                          for t in tensors]
                out[attr.name] = arrays[0] if attr.type == 4 else arrays
                continue
            if attr.type in (11, 12):  # SPARSE_TENSOR(S)
                raise self.error(f"attribute {show(attr.name)} is a sparse tensor, which graphc does not import")
            value = self.onnx.helper.get_attribute_value(attr)
            out[attr.name] = value.decode() if isinstance(value, bytes) else value
        return out

    def allow(self, shape, dtype, what: str) -> None:
        """Refuse an array the import would build (a ConstantOfShape, a Range, an Expand) over
        the memory budget, before it is allocated: a tiny file must not claim gigabytes."""
        nbytes = math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize  # Python ints: never wraps
        if nbytes > self.budget:
            raise self.error(f"{what} of shape {show(list(shape))} would take {nbytes} bytes, over the memory "
                             f"budget of {self.budget} bytes")

    def emit(self, op: str, inputs: list, attrs: dict | None = None) -> Value:
        return self.builder.emit1(op, [self.value(x) for x in inputs], attrs or {}, self.meta)

    def name_like(self, derived: np.ndarray, source) -> np.ndarray:
        """``derived`` (a transposed or reshaped weight) keeps ``source``'s initializer name."""
        if id(source) in self.array_names:
            self.array_names[id(derived)] = (derived, self.array_names[id(source)][1])
        return derived

    def value(self, x) -> Value:
        """A graph Value for ``x``: static arrays become constants of the graph."""
        if isinstance(x, Value):
            return x
        array = np.asarray(x)
        if array.dtype == object:
            raise self.error("a shape that depends on the batch size is used as a tensor; graphc keeps shapes "
                             "static apart from the batch dim")
        try:
            DType.from_any(array.dtype)
        except GraphcError:
            raise self.error(f"a {array.dtype} tensor is used as data; graphc has no {array.dtype} dtype") from None
        if id(x) not in self.constants:
            base = clean_name(self.array_names.get(id(x), (None, ""))[1], f"c{len(self.graph.constants)}")
            name = self.graph.unique_name(base, self.builder._taken)
            self.builder.reserve(name)
            value = Value(name, TensorType(array.shape, DType.from_any(array.dtype)))
            self.constants[id(x)] = (x, self.graph.add_constant(value, array))  # x kept alive: its id stays unique
        return self.constants[id(x)][1]

    def static(self, x, what: str) -> np.ndarray:
        """``x`` as an array known while importing (a shape, axes, a clip bound): computed now
        when the graph makes it from constants; a ``NeedsInputValues`` naming the inputs it is
        computed from otherwise (the importer then specializes the plan on their values)."""
        if x is None:
            raise self.error(f"{what} must be given")
        if isinstance(x, Value):
            try:
                return evaluate(self, x, what)
            except GraphcError as e:
                raise e.located(describe_location(self.meta)) from None
        return x
