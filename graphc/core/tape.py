"""The eager tape: ``loss.backward()`` on eager tensors, with the compiler's own vjp rules.

While grad mode is on, every eager op that reads a tensor requiring grad leaves a
:class:`TapeEntry` (op name, attrs, input tensors, output arrays) on its outputs. ``backward``
turns the entries that lead to the loss into an ``ir.Graph`` (the leaves requiring grad become
its state), runs the same autodiff pass a compiled training plan runs on it, executes the
backward nodes with ``run_graph_node`` and adds the results into each leaf's ``.grad``. There
is no second set of derivative rules: eager and compiled gradients come from one registry.

Grad mode (``no_grad``, ``enable_grad``, ``set_grad_enabled``) lives in graphc/core/grad_mode.py.

>>> import numpy as np, graphc as gc
>>> w = gc.tensor([1.0, 2.0], requires_grad=True)
>>> (w * w).sum().backward()
>>> w.grad.numpy().tolist()
[2.0, 4.0]
"""
from __future__ import annotations

import numpy as np

from .grad_mode import is_grad_enabled
from ..executor.backends import backend_of
from ..executor.run_node import run_graph_node
from ..ir.builder import Builder
from ..ir.errors import GraphcError
from ..ir.graph import Graph, Node, Value
from ..ir.types import DType, TensorType

class TapeEntry:
    """One recorded eager op: what ``backward`` needs to rebuild its node.

    ``inputs`` are the input Tensors (Python scalars were already made arrays), with the
    version each had when recorded: an in-place change before ``backward`` is an error, as in
    PyTorch. ``outputs`` are the forward results (the vjp rules read them). ``freed`` once a
    backward without ``retain_graph`` has used it."""

    __slots__ = ("op", "attrs", "inputs", "versions", "outputs", "source", "freed", "data_parallel")

    def __init__(self, op, attrs, inputs, outputs, source):
        self.op, self.attrs, self.inputs, self.outputs, self.source = op, attrs, inputs, outputs, source
        self.versions = [getattr(t, "_version", 0) for t in inputs]
        self.freed = False
        self.data_parallel = None  # set by DistributedDataParallel on its outputs: (bucket bytes, parameters)


def needs_recording(tensors) -> bool:
    return is_grad_enabled() and any(t.requires_grad for t in tensors)


def record(op: str, attrs: dict, inputs: list, outputs: list) -> None:
    """Attach a tape entry to the float outputs of an eager op (``inputs``: Tensors)."""
    from .source import user_source

    entry = TapeEntry(op, attrs, inputs, [t.array for t in outputs], user_source())
    for index, out in enumerate(outputs):
        if out.dtype.is_float or out.dtype.is_complex:
            out._grad_fn = (entry, index)
            out.requires_grad = True


def backward(tensor, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
    """``tensor.backward()``: add d(tensor)/d(leaf) into the ``.grad`` of every leaf that
    requires grad (see the module doc)."""
    from .source import user_source

    where = f"at {user_source()}"
    if create_graph:
        raise GraphcError("backward(create_graph=True): graphc does not differentiate eagerly through a backward "
                          "(no higher-order gradients); compile the function and differentiate the plan instead", where)
    if inputs is not None:
        raise GraphcError("backward(inputs=...) is not supported: gradients go to every leaf that requires grad", where)
    if not tensor.requires_grad:
        raise GraphcError("element 0 of tensors does not require grad and does not have a grad_fn: the value was "
                          "computed without any tensor that requires grad, or inside gc.no_grad()", where)
    gradient = _seed(tensor, gradient, where)
    entries = _entries(tensor, where)
    graph, env, leaves, loss, recorded = _rebuild(tensor, entries, gradient, where)
    from ..passes.autodiff import autodiff

    graph, grads = autodiff(graph, loss, list(leaves))
    grads.update(_average_data_parallel(graph, grads, leaves, entries))
    backend = backend_of(tensor.array)
    for node in graph.nodes:  # the seed's nodes (a gradient argument, a sum), then the backward
        if all(id(v) in env for v in node.outputs):  # run eagerly already (a scan's vjp may swap in its
            continue  # twin that also returns the carries it saw: that one runs here)
        arrays = [env[id(v)] if id(v) in env else backend.asarray(graph.constant_data[v.name]) for v in node.inputs]
        for value, array in zip(node.outputs, run_graph_node(node, arrays, backend)):
            env[id(value)] = array
    for name, grad in grads.items():
        if grad is not None:
            _accumulate(leaves[name], env[id(grad)])
    if not retain_graph:
        _free(tensor)


def _seed(tensor, gradient, where):
    """The output's cotangent: 1 for a one-element output, else the given ``gradient``."""
    from .tensor import Tensor

    if gradient is None:
        if tensor.array.size != 1:
            raise GraphcError(f"grad can be implicitly created only for scalar outputs: backward() on a tensor of "
                              f"shape {tuple(tensor.shape)} needs a gradient argument of that shape", where)
        return None
    array = gradient.array if isinstance(gradient, Tensor) else np.asarray(gradient, tensor.array.dtype)
    if tuple(array.shape) != tuple(tensor.shape):
        raise GraphcError(f"backward: gradient of shape {tuple(array.shape)} for a tensor of shape "
                          f"{tuple(tensor.shape)}", where)
    return backend_of(tensor.array).asarray(array).astype(tensor.array.dtype, copy=False)


def _entries(tensor, where) -> list:
    """The tape entries ``tensor`` was computed from, inputs before users."""
    order, seen, stack = [], set(), [(tensor._grad_fn[0], False)]
    while stack:
        entry, done = stack.pop()
        if done:
            order.append(entry)
            continue
        if id(entry) in seen:
            continue
        if entry.freed:
            raise GraphcError("trying to backward through the graph a second time: its saved values were freed "
                              "by the first backward(); call backward(retain_graph=True) the first time", where)
        seen.add(id(entry))
        stack.append((entry, True))
        stack.extend((t._grad_fn[0], False) for t in entry.inputs
                     if t._grad_fn is not None and id(t._grad_fn[0]) not in seen)
    return order


def _average_data_parallel(graph, grads: dict, leaves: dict, entries: list) -> dict:
    """The gradients of a DistributedDataParallel module's parameters averaged over the
    processes, by the same ``allreduce`` buckets as a compiled plan; {} when no entry behind
    the loss came out of such a module."""
    from ..passes.distributed import average_gradients

    tags = [entry.data_parallel for entry in entries if entry.data_parallel is not None]
    if not tags:
        return {}
    params = set().union(*(ids for _, ids in tags))
    named = [(name, grad) for name, grad in grads.items() if id(leaves[name]) in params]
    return average_gradients(Builder(graph), named, min(size for size, _ in tags))


def _rebuild(tensor, entries, gradient, where):
    """The recorded computation as a Graph: ``(graph, arrays by value id, {state name: leaf
    tensor}, the scalar to differentiate, how many nodes were recorded)``; the nodes after
    those (the seed's) have not run yet."""
    graph = Graph("backward")
    env, values, leaves = {}, {}, {}
    entry_values = {}
    for count, entry in enumerate(entries):
        for t, version in zip(entry.inputs, entry.versions):
            if t._version != version:
                raise GraphcError(f"a tensor that {entry.op} (at {entry.source}) saved for the gradient was changed "
                                  "in place before backward(); clone it before changing it", where)
        inputs = [_input_value(graph, t, env, values, leaves, entry_values) for t in entry.inputs]
        outputs = [Value(f"t{count}_{i}", TensorType(tuple(a.shape), DType.from_any(a.dtype)))
                   for i, a in enumerate(entry.outputs)]
        for value, array in zip(outputs, entry.outputs):
            env[id(value)] = array
        entry_values[id(entry)] = outputs
        meta = {"source": entry.source} if entry.source else {}
        graph.nodes.append(Node(entry.op, inputs, outputs, entry.attrs, meta))
    loss = entry_values[id(tensor._grad_fn[0])][tensor._grad_fn[1]]
    builder = Builder(graph)
    if gradient is not None:  # d(sum(out * g)) is the vector-Jacobian product with g
        seed = graph.add_input(Value("gradient", loss.type))
        env[id(seed)] = gradient
        loss = builder.emit1("mul", [loss, seed])
    if loss.type.shape != ():
        loss = builder.emit1("sum", [loss], {"dims": None, "keepdim": False})
    return graph, env, leaves, loss, len(entry_values)


def _input_value(graph, t, env, values, leaves, entry_values) -> Value:
    if t._grad_fn is not None:
        entry, index = t._grad_fn
        return entry_values[id(entry)][index]
    value = values.get(id(t))
    if value is None:
        ttype = TensorType(tuple(t.array.shape), DType.from_any(t.array.dtype))
        if t.requires_grad:
            value = graph.add_state(Value(f"leaf{len(leaves)}", ttype), "param")
            leaves[value.name] = t
        else:
            value = graph.add_input(Value(f"input{len(values)}", ttype))
        values[id(t)] = value
        env[id(value)] = t.array
    return value


def _accumulate(leaf, grad) -> None:
    from .tensor import Tensor

    if leaf.grad is None:
        # a copy (two leaves may share one cotangent array), and an array even where numpy made
        # a 0-d result a scalar, so that in-place uses (clipping) work
        leaf.grad = Tensor(backend_of(leaf.array).xp.array(grad, copy=True))
    else:
        leaf.grad.array += grad


def _free(tensor) -> None:
    """Drop what the entries behind ``tensor`` hold, so their arrays can be freed."""
    stack = [tensor._grad_fn[0]]
    while stack:
        entry = stack.pop()
        if entry.freed:
            continue
        entry.freed = True
        stack.extend(t._grad_fn[0] for t in entry.inputs if t._grad_fn is not None)
        entry.outputs = None
        entry.inputs = []
