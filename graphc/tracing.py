"""Tracing a model or function once into an ``ir.Graph``: the builder under ``gc.jit.trace``,
``gc.compile`` and ``gc.export`` (graphc/compile.py is the front door over it; the training
builders in graphc/training.py use it too)."""
from __future__ import annotations

import contextlib
import re

import numpy as np

from .executor.backends import backend_of
from .ir.errors import GraphcError, TraceError
from .ir.errors import ShapeError
from .ir.types import BATCH, DType, bind_dim, dim_symbols, dim_terms, is_symbol, terms_dim
from .passes.numeric_check import Example, check_verify
from .core.tensor import Tensor
from .branching import trace_both_ways
from .core.tracer import Tracer, active, input_names
from .core.traced_scalars import traced_number
from .core.step_trace import gradient_outputs


def _example_array(x, index):
    if isinstance(x, Tensor) and x._tracer is None:
        return x.numpy()  # also brings GPU tensors to the host: tracing needs shapes only
    if isinstance(x, Tensor) or not hasattr(x, "__array__") and not isinstance(x, (list, float, int)):
        raise GraphcError(f"example input {index} must be an array or an eager Tensor, got {type(x).__name__}")
    array = backend_of(x).to_numpy(x) if hasattr(x, "__array__") else np.asarray(x)
    array = np.asarray(array)
    DType.from_any(array.dtype)
    return array


def numeric_example(verify, example_inputs, state_arrays: dict, rates=()) -> Example | None:
    """What ``verify="numeric"`` runs each pass's graphs on (host copies of the example inputs
    and of the state; ``rates``: each optimizer group's learning rate), or None without it."""
    check_verify(verify)
    if verify != "numeric":
        return None
    inputs = [_example_array(x, i) for i, x in enumerate(example_inputs)]
    state = {name: backend_of(a).to_numpy(a) for name, a in state_arrays.items()}  # GPU models too
    return Example(inputs, state, tuple(float(r) for r in rates))


ZERO_BATCH = "the example inputs have a zero-size batch (trace with at least one example for a symbolic batch)"


def trace_model(fn, example_inputs, name=None, dynamic_batch=True, root=None, names=None, dynamic_dims=None):
    """Trace and also return the tracer (which holds the state arrays the plan shares).

    ``root`` is the module whose parameters and buffers become graph state (default: ``fn``
    when it is a Module); ``names`` overrides the input names taken from the signature;
    ``dynamic_dims`` (see :func:`graphc.compile`) names the input dims that may vary.
    """
    from .nn.module import Module

    root = root if root is not None else (fn if isinstance(fn, Module) else None)
    given = (names, example_inputs)  # as called: a trace that pins a symbolic size starts again from these
    names = names or input_names(fn, len(example_inputs))
    input_tree = None
    if any(isinstance(x, tuple) for x in example_inputs):  # (h0, c0): one plan input per tensor
        example_inputs, names, input_tree = _flat_inputs(example_inputs, names)
    arrays = [_example_array(x, i) for i, x in enumerate(example_inputs)]
    # Python numbers are plan inputs that the function sees as (traced) Python numbers
    numbers = [x if type(x) in (int, float) else None for x in example_inputs]
    declared = declared_dims(dynamic_dims, names, arrays)
    # the first input with a leading dim (not declared otherwise) sets N, unless a dim is declared N
    batched = next((a for a, dims in zip(arrays, declared) if a.ndim and 0 not in dims), None)
    if batched is not None and batched.shape[0] == 0 and dynamic_batch:  # 0 cannot tell N from other dims
        graph, tracer = trace_model(fn, given[1], name, False, root, given[0], dynamic_dims)
        graph.meta["fixed_batch"] = {"size": 0, "where": ZERO_BATCH}
        return graph, tracer
    if name is None:
        name = type(root).__name__ if root is not None else getattr(fn, "__name__", "fn")
    sizes = _sizes(declared, arrays)
    implicit_batch = BATCH not in sizes  # N from the first input's leading dim, not declared by the caller
    batch = sizes.pop(BATCH, None) or (batched.shape[0] if batched is not None and dynamic_batch else None)
    _check_products(declared, arrays, {**sizes, **({BATCH: batch} if batch is not None else {})})
    shape_of = [{**({0: BATCH} if batch is not None and a.ndim and a.shape[0] == batch else {}), **dims}
                for a, dims in zip(arrays, declared)]
    try:
        graph, tracer = trace_both_ways(
            lambda decisions, also: _trace_once(fn, arrays, numbers, name, root, names, (batch, sizes, shape_of),
                                                decisions, also, input_tree), root)
    except GraphcError as refused:  # ShapeError, TraceError, or an op's own refusal of a symbolic dim
        if batch is None or not implicit_batch or not _names_the_batch(refused):
            raise  # not about N, or N is a symbol the caller declared: the refusal stands
        return _trace_at_fixed_batch(refused, fn, given, name, root, dynamic_dims, batch)
    except PinnedDims as pinned:  # len(x) read a size, then a shape mixed it with the symbol: trace it fixed
        kept = [{d: sym for d, sym in dims.items() if not set(dim_symbols(sym)) & pinned.symbols} for dims in declared]
        fixes_batch = batch is not None and BATCH in pinned.symbols
        if kept == declared and not fixes_batch:
            raise pinned.error from None
        return trace_model(fn, given[1], name, dynamic_batch and not fixes_batch, root, given[0],
                           dynamic_dims={i: dims for i, dims in enumerate(kept) if dims})
    if input_tree is not None:
        graph.meta["input_tree"] = input_tree
    refuse_low_precision(graph)
    return graph, tracer


def _names_the_batch(error) -> bool:
    """Does a trace's refusal involve the symbolic batch dim? graphc prints it as ``N`` in
    shapes (``f32[N,3]``, ``[N,4] and [2,4]``) and names it in words (``along the batch dim``)."""
    text = error.message if isinstance(error, GraphcError) else str(error)
    return bool(_BATCH_WORDS.search(text))


_BATCH_WORDS = re.compile(r"\[N[,\]*]|[,*]N[,\]*]|\(N\)|'N'|batch (dim|size)|symbolic dim")


def _trace_at_fixed_batch(refused, fn, given, name, root, dynamic_dims, batch):
    """The trace with a symbolic batch failed (an op needs the batch size: ``flip``/``cumsum``
    along it, ``x.reshape(2, 12)``, a weight whose first dim happens to equal the batch): trace
    again at the example's batch size, as ``torch.compile`` specializes a size it cannot keep
    symbolic. The plan then runs at that batch size only, and refuses another naming why. If the
    fixed trace fails too, the first refusal is the one to show."""
    try:
        graph, tracer = trace_model(fn, given[1], name, False, root, given[0], dynamic_dims)
    except GraphcError:
        raise refused from None  # the batch was not the only problem: the first refusal says where
    reason = (refused.message if isinstance(refused, GraphcError) else str(refused)).splitlines()[0]
    reason = reason.split(";")[0]  # what needed the size, not the old advice
    if len(reason.split(": the ")[0]) > 12:  # "flip along the batch dim (N) ...: the pieces' sizes ..."
        reason = reason.split(": the ")[0]
    reason = reason[:160]
    where = getattr(refused, "where", None)
    graph.meta["fixed_batch"] = {"size": int(batch), "where": f"{reason} {where}" if where else reason}
    return graph, tracer


def _trace_once(fn, arrays, numbers, name, root, names, dims, decisions, also_differentiate=frozenset(),
                input_tree=None):
    """One trace of ``fn``, its first traced booleans answered by ``decisions``; ``dims``:
    (the batch size, the other symbols' sizes, each input's {dim: symbol})."""
    tracer = Tracer(name, root)
    tracer.batch_size, tracer.sizes, shape_of = dims
    tracer.decisions = decisions
    tracer.also_differentiate = also_differentiate
    symbols = [tracer.add_input(n, a, False, shape) for n, a, shape in zip(names, arrays, shape_of)]
    tracer.examples = {t._value.name: x for t, x in zip(symbols, numbers) if x is not None}
    symbols = [traced_number(t, type(x), x, (t._value.name,)) if x is not None else t for t, x in zip(symbols, numbers)]
    if input_tree is not None:
        symbols = nest_inputs(input_tree, symbols)
    with tracing_modules(root, tracer), active(tracer):
        try:
            result = fn(*symbols)
        except ShapeError as e:
            pinned = {BATCH} if "fixed_batch" in tracer.graph.meta else set()
            pinned |= set(tracer.graph.meta.get("fixed_dims", {}))
            if pinned:
                raise PinnedDims(pinned, e) from None
            raise
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    if any(isinstance(out, (tuple, list, dict)) for out in outputs):  # LSTM's (output, (h_n, c_n))
        outputs, tree = _flat_outputs(result)
        tracer.graph.meta["output_tree"] = tree
    outputs = [out.tensor if hasattr(out, "weak_for") else out for out in outputs]  # loss.item(): its 0-d value
    if not any(isinstance(out, Tensor) for out in outputs):
        raise TraceError("the traced function returned no tensor")
    for i, out in enumerate(outputs):
        if out is not None and not isinstance(out, Tensor):
            raise TraceError(f"output {i} is a {type(out).__name__}, not a Tensor")
    # None outputs (a model's loss when no targets are given) are no graph values: the plan
    # puts None back at their positions (graph.meta["none_outputs"]).
    tracer.graph.outputs = [tracer.lift(out, []) for out in outputs if out is not None]
    none_at = [i for i, out in enumerate(outputs) if out is None]
    if none_at:
        tracer.graph.meta["none_outputs"] = none_at
    tracer.graph.output_names = [f"output{i}" if len(outputs) > 1 else "output"
                                 for i, out in enumerate(outputs) if out is not None]
    gradients = gradient_outputs(tracer)  # an L-BFGS closure: the plan sets the parameters' .grad
    if gradients:
        tracer.graph.outputs += [grad._value for _, grad, _ in gradients]
        tracer.graph.output_names += [f"grad.{name}" for name, _, _ in gradients]
        tracer.graph.meta["gradients"] = [{"param": name, "accumulates": acc} for name, _, acc in gradients]
    return tracer.graph, tracer


class PinnedDims(Exception):
    """A trace read symbolic sizes as plain numbers (``len(x)``, ``int(x.size(0))``) and then
    failed to combine a shape at that number with one at the symbol (``x + c[:len(x)]``):
    :func:`trace_model` traces again with those dims fixed at the example's sizes."""

    def __init__(self, symbols: set, error: ShapeError):
        super().__init__(str(error))
        self.symbols, self.error = symbols, error


def _flat_inputs(example_inputs, names) -> tuple[list, list, list]:
    """Tuples among the example inputs (an LSTM's ``(h0, c0)``) as one input per tensor, named
    ``hidden_0``, ``hidden_1``: ``(leaves, their names, tree)``; the tree (plain data, one
    entry per input: 0 for a tensor, a list for a tuple) nests them back (:func:`nest_inputs`)."""
    leaves, leaf_names = [], []

    def walk(item, name, depth):
        if not isinstance(item, tuple):
            leaves.append(item)
            leaf_names.append(name)
            return 0
        if depth > 16 or not item:
            raise GraphcError(f"example input {name!r}: tuples must hold tensors, at most 16 deep")
        return [walk(v, f"{name}_{i}", depth + 1) for i, v in enumerate(item)]
    tree = [walk(x, name, 0) for x, name in zip(example_inputs, names)]
    return leaves, leaf_names, tree


def nest_inputs(tree, leaves) -> list:
    """The inputs nested along ``tree`` (the inverse of :func:`_flat_inputs`)."""
    it = iter(leaves)

    def build(t):
        return next(it) if t == 0 else tuple(build(s) for s in t)
    return [build(t) for t in tree]


def _flat_outputs(result) -> tuple[list, list]:
    """Nested tuples, lists and dicts of outputs as ``(leaves, tree)``: the plan returns the
    leaves rebuilt along ``tree`` (plain data: a leaf's index, a list per tuple or list,
    ``["dict", keys, subtrees]`` per dict with string keys)."""
    leaves = []

    def walk(item, depth):
        if depth > 16:
            raise TraceError("the traced function's outputs are nested more than 16 deep")
        if isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                raise TraceError("a dict among the traced function's outputs must have string keys")
            return ["dict", list(item), [walk(v, depth + 1) for v in item.values()]]
        if isinstance(item, (tuple, list)):
            return [walk(v, depth + 1) for v in item]
        leaves.append(item)
        return len(leaves) - 1
    tree = walk(result, 0)
    return leaves, tree


def declared_dims(dynamic_dims, names: list, arrays: list) -> list:
    """Each input's ``{dim: symbol}`` from ``dynamic_dims``: ``{input: {dim: "T"}}`` (an input
    by name or position) or ``{input: (dims...)}`` (symbols named ``<input>_<dim>``)."""
    declared = [{} for _ in arrays]
    for key, dims in (dynamic_dims or {}).items():
        index = names.index(key) if key in names else key
        if not isinstance(index, int) or not 0 <= index < len(arrays):
            raise GraphcError(f"dynamic_dims: {key!r} is not an input (inputs: {', '.join(names)})")
        array = arrays[index]
        if not isinstance(dims, dict):
            dims = {d: f"{names[index]}_{d % array.ndim if array.ndim else d}" for d in dims}
        for dim, symbol in dims.items():
            if not isinstance(dim, int) or not -array.ndim <= dim < array.ndim:
                raise GraphcError(f"dynamic_dims: input {names[index]!r} of shape {array.shape} has no dim {dim!r}")
            if not _is_dim_name(symbol):
                raise GraphcError(f"dynamic_dims: {symbol!r} (input {names[index]!r}, dim {dim}) is not a name for a "
                                  "dim (letters, digits and _, not starting with a digit; or a product of those and "
                                  "ints, such as 'T*N' for a flattened sequence)")
            if array.shape[dim % array.ndim] < 2:
                raise GraphcError(f"dynamic_dims: dim {dim} of input {names[index]!r} has size "
                                  f"{array.shape[dim % array.ndim]} in the example; trace with a size of at least 2 "
                                  "(a size of 1 would read as broadcasting)")
            declared[index][dim % array.ndim] = symbol if is_symbol(symbol) else terms_dim(*dim_terms(symbol))
    return declared


def _is_dim_name(name) -> bool:
    try:
        return isinstance(name, str) and bool(dim_terms(name)[1])
    except ShapeError:
        return False


def _check_products(declared: list, arrays: list, sizes: dict) -> None:
    """A declared product (``"T*N"``) must have each symbol declared alone somewhere, and equal
    the product of their example sizes."""
    for dims, array in zip(declared, arrays):
        for dim, name in dims.items():
            if is_symbol(name):
                continue
            missing = [s for s in dim_symbols(name) if s not in sizes]
            if missing:
                raise GraphcError(f"dynamic_dims: {name} names {', '.join(missing)}, which no input has alone; declare "
                                  "each symbol as a dim of its own on some input")
            if bind_dim(name, sizes) != array.shape[dim]:
                raise GraphcError(f"dynamic_dims: {name} is {bind_dim(name, sizes)} in the example, but that dim has "
                                  f"size {array.shape[dim]}")


def _sizes(declared: list, arrays: list) -> dict:
    """Each declared symbol's example size (one symbol, one size)."""
    sizes = {}
    for dims, array in zip(declared, arrays):
        for dim, symbol in dims.items():
            if not is_symbol(symbol):
                continue  # a product: checked once every symbol has a size
            if sizes.setdefault(symbol, array.shape[dim]) != array.shape[dim]:
                raise GraphcError(f"dynamic_dims: {symbol} is {sizes[symbol]} in one example input and "
                                  f"{array.shape[dim]} in another; one symbol must have one size")
    return sizes


FLOAT16_HINT = ("runs in eager tensors only; compiled plans need float32 or float64 (BatchNorm and "
                "optimizer math in half precision would need float32 master copies, which graphc does not "
                "have yet): convert with model.float() and x.astype(np.float32)")


def refuse_low_precision(graph) -> None:
    """Compiled plans are float32/float64: say so at compile time, naming the first float16
    (bfloat16, float8, float4) value. Imported ONNX plans, inference only, may hold them."""
    for value in graph.inputs:
        if value.type.dtype.is_low_precision:
            raise GraphcError(f"input {value.name!r} is {value.type}: {value.type.dtype.name} {FLOAT16_HINT}")
    for name, value in graph.state.items():
        if value.type.dtype.is_low_precision:
            raise GraphcError(f"parameter or buffer {name!r} is {value.type}: {value.type.dtype.name} {FLOAT16_HINT}")
    for node in graph.nodes:
        low = next((v.type.dtype for v in node.outputs if v.type.dtype.is_low_precision), None)
        if low is not None:
            raise GraphcError(f"{node.op} makes a {low.name} value: {low.name} {FLOAT16_HINT}", node.location())


@contextlib.contextmanager
def tracing_modules(root, tracer):
    """While tracing, every module of ``root`` reads its parameters and buffers as graph values,
    wherever and however it is called (so none is frozen by an eager call)."""
    marked = [m for m in root.modules() if m.__dict__.get("_gc_tracer") is None] if root is not None else []
    for module in marked:
        object.__setattr__(module, "_gc_tracer", tracer)
    try:
        yield
    finally:
        for module in marked:
            object.__setattr__(module, "_gc_tracer", None)
