"""``gc.cond``, ``gc.scan`` and ``gc.while_loop``: PyTorch's control-flow operators.

Eagerly they run as Python (the branch taken, a loop), so eager autograd sees plain ops.
Inside a trace each becomes ONE node (``ir/ops/control.py``) whose bodies are traced once
into graphs by a :class:`BodyTracer`: a tensor a body uses from outside (a closure, a
model's parameter, a constant) is captured, becoming a trailing operand of the node and an
input of the body, so bodies read only their inputs and a saved plan needs no user code.

>>> import graphc as gc
>>> x = gc.tensor([1.0, -2.0])
>>> gc.cond(x.sum() > 0, lambda t: t * 2, lambda t: -t, (x,)).tolist()
[-1.0, 2.0]
>>> carry, ys = gc.scan(lambda c, v: (c + v, c + v), gc.tensor(0.0), gc.tensor([1.0, 2.0, 3.0]))
>>> carry.item(), ys.tolist()
(6.0, [1.0, 3.0, 6.0])
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError, TraceError
from ..ir.graph import Value
from ..ir.ops.control import step_type
from ..ir.registry import get_op
from .tensor import Tensor
from .tracer import Tracer, active, current_tracer


# ---- pytrees: tuples, lists and dicts of tensors ------------------------------------------------
def flatten(tree) -> tuple[list, object]:
    """``(leaves, structure)``: the tensors of nested tuples/lists/dicts, in order."""
    if isinstance(tree, (tuple, list)):
        parts = [flatten(t) for t in tree]
        return [leaf for p in parts for leaf in p[0]], (type(tree), [p[1] for p in parts])
    if isinstance(tree, dict):
        parts = [flatten(t) for t in tree.values()]
        return [leaf for p in parts for leaf in p[0]], (dict, list(tree), [p[1] for p in parts])
    if tree is None:
        return [], None
    return [tree if isinstance(tree, Tensor) else Tensor(np.asarray(tree))], "leaf"


def unflatten(structure, leaves):
    it = iter(leaves)

    def build(s):
        if s == "leaf":
            return next(it)
        if s is None:
            return None
        if s[0] is dict:
            return dict(zip(s[1], (build(p) for p in s[2])))
        return s[0](build(p) for p in s[1])
    return build(structure)


# ---- tracing a body -----------------------------------------------------------------------------
class BodyTracer(Tracer):
    """Traces one body inside ``parent``'s trace. Tensors from outside are captured: the
    parent lifts them (its own values, a model's state, constants) and the body reads them
    through an input of its own."""

    def __init__(self, name: str, parent: Tracer, what: str):
        super().__init__(name)
        self.parent, self.what = parent, what
        self.batch_size, self.sizes = parent.batch_size, parent.sizes
        self.scope, self.module_names, self.root_type = parent.scope, parent.module_names, parent.root_type
        self.captured: dict[int, Value] = {}  # id(parent's value) -> the body input reading it
        self.captured_outer: list[Value] = []

    def placeholder(self, name: str, ttype) -> Tensor:
        value = self.graph.add_input(Value(self.graph.unique_name(name), ttype))
        self.builder.reserve(value.name)
        return Tensor(_value=value, _tracer=self)

    def lift(self, x, dtypes) -> Value:
        if isinstance(x, Tensor) and x._tracer is self:
            return x._value
        if getattr(x, "_tracer", None) is self:  # a traced Python number made in this body
            return super().lift(x, dtypes)
        outer = self.parent.lift(x, dtypes)
        if id(outer) not in self.captured:
            self.captured[id(outer)] = self.placeholder("captured", outer.type)._value
            self.captured_outer.append(outer)
        return self.captured[id(outer)]

    def state_name(self, tensor):
        return self.parent.state_name(tensor)  # an op on a model's parameter inside a body is traced

    def fix_batch(self) -> None:
        self.parent.fix_batch()

    def fix_size(self, dim) -> None:
        self.parent.fix_size(dim)

    def _refuse(self, action: str):
        raise TraceError(f"{action} inside a {self.what} body: a body is a pure function of its inputs (it cannot "
                         "update parameters or buffers, or run backward or an optimizer); do it outside",
                         self.user_location())

    def assign(self, target, new) -> None:
        self._refuse("updating a buffer (BatchNorm running statistics in training mode?)")

    def write_state(self, name, new) -> None:
        self._refuse(f"an in-place write to {name}")

    def backward(self, *args, **kwargs) -> None:
        self._refuse("backward()")

    def optimizer_step(self, optimizer) -> None:
        self._refuse("optimizer.step()")


def trace_body(parent: Tracer, fn, args: list, name: str, what: str) -> tuple:
    """Trace ``fn(*args)`` (``args`` are pytrees of placeholder types) into a body graph.
    Returns ``(tracer, out leaves' Values, out structure)``."""
    body = BodyTracer(name, parent, what)
    counter = iter(range(1 << 30))

    def placeholders(tree):
        leaves, structure = tree
        return unflatten(structure, [body.placeholder(f"arg{next(counter)}", t) for t in leaves])
    with active(body):
        result = fn(*(placeholders(a) for a in args))
    leaves, structure = flatten(result)
    for leaf in leaves:
        if not isinstance(leaf, Tensor):
            raise TraceError(f"a {what} body returned a {type(leaf).__name__}; it must return tensors",
                             parent.user_location())
    outputs = [body.lift(leaf, []) for leaf in leaves]
    for node in body.graph.nodes:
        if get_op(node.op).effects != "pure":
            raise TraceError(f"{node.op} ({get_op(node.op).effects}) inside a {what} body is not supported: bodies "
                             "must be pure functions of their inputs (apply dropout outside the body)",
                             node.location())
    body.graph.outputs = outputs
    return body, outputs, structure


def join_captures(bodies: list) -> list:
    """Give every body one input per value any of them captured, in one shared order after
    their own inputs; returns the captured parent values (the node's trailing operands)."""
    order: dict[int, Value] = {}
    for body in bodies:
        for v in body.captured_outer:
            order.setdefault(id(v), v)
    for body in bodies:
        own = [v for v in body.graph.inputs if v not in body.captured.values()]
        taken = body.graph.value_names()
        caps = []
        for key, v in order.items():
            if key not in body.captured:  # another body reads it: an input this one leaves alone
                name = body.graph.unique_name("unused", taken)
                taken.add(name)
            caps.append(body.captured.get(key) or Value(name, v.type))
        body.graph.inputs = own + caps
    return list(order.values())


def _tracer_of(leaves):
    return next((t._tracer for t in leaves if isinstance(t, Tensor) and t._tracer is not None), None) or \
        current_tracer()


def _as_tensor(x):
    return x if isinstance(x, Tensor) else Tensor(np.asarray(x))


def _as_traced(tracer, values: list) -> list:
    return [Tensor(_value=v, _tracer=tracer) for v in values]


# ---- the operators ------------------------------------------------------------------------------
def cond(pred, true_fn, false_fn, operands=()):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)`` (``torch.cond``).

    ``pred`` is a Python bool or a one-element tensor. Compiled, it is one ``cond`` node
    holding both branches, choosing at run time; both must return the same structure of
    tensors of the same types. Gradients flow through the branch taken.

    >>> import graphc as gc
    >>> gc.cond(gc.tensor(False), lambda a: a + 1, lambda a: a - 1, (gc.tensor([1.0]),)).tolist()
    [0.0]
    """
    if not isinstance(operands, (tuple, list)):
        raise GraphcError(f"cond: operands must be a tuple or list of tensors, got {type(operands).__name__}")
    trees = [flatten(o) for o in operands]  # each operand a tensor or a tuple/list/dict of them
    leaves = [leaf for tree, _ in trees for leaf in tree]
    tracer = _tracer_of([pred, *leaves])
    if tracer is None or not isinstance(pred, Tensor):  # eager, or a decision known while tracing
        if isinstance(pred, Tensor) and pred.numel() != 1:
            raise GraphcError(f"cond: the predicate must have one element, got shape {tuple(pred.shape)}")
        return (true_fn if bool(pred) else false_fn)(*(unflatten(s, t) for t, s in trees))
    args = [([tracer.lift(leaf, []).type for leaf in tree], structure) for tree, structure in trees]
    branches = [trace_body(tracer, fn, args, f"{label}_branch", "cond")
                for fn, label in ((true_fn, "true"), (false_fn, "false"))]
    (true, true_out, true_structure), (false, false_out, false_structure) = branches
    if true_structure != false_structure:
        raise TraceError("cond: the two branches return different structures of tensors", tracer.user_location())
    if [v.type for v in true_out] != [v.type for v in false_out]:
        raise TraceError(f"cond: the branches return different types: {[str(v.type) for v in true_out]} and "
                         f"{[str(v.type) for v in false_out]}", tracer.user_location())
    captured = join_captures([true, false])
    out = tracer.record("cond", [pred, *leaves, *_as_traced(tracer, captured)],
                        {"true_branch": true.graph, "false_branch": false.graph})
    return unflatten(true_structure, out if isinstance(out, tuple) else (out,))


def scan(combine_fn, init, xs, dim: int = 0, reverse: bool = False):
    """``(final carry, ys)``: ``carry, y = combine_fn(carry, x)`` for each position of ``xs``
    along ``dim`` (last to first with ``reverse``), ys stacked along ``dim`` at their xs'
    positions (PyTorch's ``scan``, ``jax.lax.scan``). ``init`` and ``xs`` may be tuples,
    lists or dicts of tensors. Compiled, it is one ``scan`` node, not an unrolled graph; its
    gradient is a reverse scan over the carries the forward saved.

    >>> import graphc as gc
    >>> _, ys = gc.scan(lambda c, x: (c * x, c * x), gc.tensor(1.0), gc.tensor([2.0, 3.0]), reverse=True)
    >>> ys.tolist()
    [6.0, 3.0]
    """
    init_leaves, init_structure = flatten(init)
    xs_leaves, xs_structure = flatten(xs)
    if not xs_leaves:
        raise GraphcError("scan: xs holds no tensor to scan over")
    if any(x.ndim <= dim for x in xs_leaves):
        raise GraphcError(f"scan: dim={dim} is out of range for xs of shapes {[tuple(x.shape) for x in xs_leaves]}")
    tracer = _tracer_of([*init_leaves, *xs_leaves])
    if tracer is None:
        return _scan_eagerly(combine_fn, init, xs_leaves, xs_structure, dim, reverse)
    init_types = [tracer.lift(c, []).type for c in init_leaves]
    x_types = [step_type(tracer.lift(x, []).type, dim) for x in xs_leaves]
    body, outputs, structure = trace_body(tracer, combine_fn, [(init_types, init_structure), (x_types, xs_structure)],
                                          "scan_step", "scan")
    carry_structure, y_structure = _split_step_result(structure, tracer)
    if carry_structure != init_structure or [v.type for v in outputs[:len(init_types)]] != init_types:
        got = [str(v.type) for v in outputs[:len(init_types)]]
        raise TraceError(f"scan: combine_fn must return the carry with init's structure and types "
                         f"{[str(t) for t in init_types]}, got {got}", tracer.user_location())
    captured = join_captures([body])
    out = tracer.record("scan", [*init_leaves, *xs_leaves, *_as_traced(tracer, captured)],
                        {"body": body.graph, "carries": len(init_leaves), "scanned": len(xs_leaves), "dim": dim,
                         "reverse": bool(reverse)})
    out = out if isinstance(out, tuple) else (out,)
    n = len(init_leaves)
    return unflatten(init_structure, out[:n]), unflatten(y_structure, out[n:])


def _split_step_result(structure, tracer):
    if not (isinstance(structure, tuple) and structure[0] in (tuple, list) and len(structure[1]) == 2):
        raise TraceError("scan: combine_fn must return a pair (next carry, y)", tracer.user_location())
    return structure[1][0], structure[1][1]


def _scan_eagerly(combine_fn, init, xs_leaves, xs_structure, dim, reverse):
    from ..ops.creation import stack

    length = xs_leaves[0].shape[dim]
    if length == 0 or any(x.shape[dim] != length for x in xs_leaves):
        raise GraphcError(f"scan: xs must have the same nonzero length along dim {dim}, got shapes "
                          f"{[tuple(x.shape) for x in xs_leaves]}")
    lead = (slice(None),) * dim
    carry, ys = init, [None] * length
    for pos in (range(length - 1, -1, -1) if reverse else range(length)):
        result = combine_fn(carry, unflatten(xs_structure, [x[(*lead, pos)] for x in xs_leaves]))
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise GraphcError("scan: combine_fn must return a pair (next carry, y)")
        carry, ys[pos] = result
    y_leaves, y_structure = zip(*(flatten(y) for y in ys))
    stacked = [stack(list(column), dim) for column in zip(*y_leaves)]
    return carry, unflatten(y_structure[0], stacked)


def while_loop(cond_fn, body_fn, carried_inputs):
    """Run ``carried = body_fn(*carried)`` while ``cond_fn(*carried)`` is true; returns the
    final carried values as a tuple (``torch.while_loop``). Compiled, it is one
    ``while_loop`` node; it has no gradient (the trip count is known only at
    run time): differentiating through it raises a ``GraphcError``.

    >>> import graphc as gc
    >>> gc.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2), (gc.tensor(0), gc.tensor(1.0)))[1].item()
    8.0
    """
    if not isinstance(carried_inputs, (tuple, list)):
        raise GraphcError("while_loop: carried_inputs must be a tuple or list of tensors")
    carried = [_as_tensor(c) for c in carried_inputs]
    tracer = _tracer_of(carried)
    if tracer is None:
        return _while_eagerly(cond_fn, body_fn, carried)
    args = [([tracer.lift(c, []).type], "leaf") for c in carried]
    test, test_out, _ = trace_body(tracer, cond_fn, args, "while_cond", "while_loop")
    body, body_out, structure = trace_body(tracer, body_fn, args, "while_body", "while_loop")
    if len(test_out) != 1:
        raise TraceError("while_loop: cond_fn must return one boolean tensor", tracer.user_location())
    if [v.type for v in body_out] != [a[0][0] for a in args]:
        raise TraceError(f"while_loop: body_fn must return the carried values with their types "
                         f"{[str(a[0][0]) for a in args]}, got {[str(v.type) for v in body_out]}",
                         tracer.user_location())
    captured = join_captures([test, body])
    out = tracer.record("while_loop", [*carried, *_as_traced(tracer, captured)],
                        {"cond": test.graph, "body": body.graph, "carried": len(carried)})
    return out if isinstance(out, tuple) else (out,)


def _while_eagerly(cond_fn, body_fn, carried):
    from .grad_mode import is_grad_enabled

    if is_grad_enabled() and any(c.requires_grad for c in carried):
        raise GraphcError("while_loop has no gradient in graphc (compiled, its trip count is known only at run time): "
                          "its carried inputs must not require grad; run it under gc.no_grad(), or "
                          "use gc.scan for a loop with a fixed number of steps")
    while bool(cond_fn(*carried)):
        result = body_fn(*carried)
        carried = [_as_tensor(c) for c in (result if isinstance(result, (tuple, list)) else (result,))]
    return tuple(carried)
