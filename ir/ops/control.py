"""Control flow: ``cond``, ``scan`` and ``while_loop``, nodes whose bodies are graphs held as data.

As a jaxpr's ``cond`` holds its branches, each node holds its bodies in graph attrs (ONNX's
``If``/``Scan``/``Loop`` do the same), so a plan that uses them saves, loads and runs without
the user's code. A body reads only its own inputs: values it captured from the enclosing
graph became trailing operands of the node when it was traced (``graphc/core/control_flow.py``).

- ``cond(pred, *operands)[true_branch, false_branch]`` runs one branch; ``pred`` has one
  element (nonzero is true). Both branches take the operands and return the same types. Its
  vjp is a ``cond`` over the branches' vjp bodies: the gradient flows through the branch taken.
- ``scan(*init, *xs, *consts)[body, carries, scanned, dim, reverse, saves]``: ``body(carry...,
  x_t..., consts...) -> (carry..., y_t...)`` once per position of ``dim`` (backwards with
  ``reverse``; ys keep the positions of their xs, as in ``torch.scan``); returns the last
  carries and the ys stacked along ``dim``. ``saves`` also returns the carries each position
  saw, stacked along dim 0 (the residuals of its vjp, a reverse scan of the body's vjp).
- ``while_loop(*carried, *consts)[cond, body, carried]``: forward only, like
  ``torch.while_loop``; asking it for a gradient is an error.
"""
from __future__ import annotations

from ..backprop import differentiable, hoist_constants, vjp_body, zeros_like
from ..errors import ShapeError
from ..graph import Graph, Node, Value
from ..registry import Attr, OpDef, register
from ..types import TensorType


def _types(values) -> list:
    return [v.type for v in values]


def _show(types) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


def _check_reads(op: str, label: str, body: Graph, want: list) -> None:
    if _types(body.inputs) != list(want):
        raise ShapeError(f"{op}: its {label} body reads {_show(_types(body.inputs))}, the node gives it {_show(want)}")


def _one_element(op: str, what: str, ttype: TensorType) -> None:
    if any(d != 1 for d in ttype.shape):
        raise ShapeError(f"{op}: {what} must have one element, got {ttype}")


# ---- cond ---------------------------------------------------------------------------------------
def _infer_cond(in_types, attrs):
    _one_element("cond", "the predicate", in_types[0])
    operands = list(in_types[1:])
    true, false = attrs["true_branch"], attrs["false_branch"]
    _check_reads("cond", "true", true, operands)
    _check_reads("cond", "false", false, operands)
    if _types(true.outputs) != _types(false.outputs):
        raise ShapeError(f"cond: the branches return different types: {_show(_types(true.outputs))} and "
                         f"{_show(_types(false.outputs))}")
    return _types(true.outputs)


def _vjp_cond(b, node, cts, needs):
    """A cond over the branches' vjps, reading (operands, cotangents of the float outputs)."""
    wrt = [i for i, need in enumerate(needs[1:]) if need]
    seeded = [i for i in differentiable(node.outputs) if cts[i] is not None]  # (not a running statistic)
    cotangents = [cts[i] for i in seeded]
    branches = {key: vjp_body(node.attrs[key], wrt, f"{node.attrs[key].name}.vjp", seeded)
                for key in ("true_branch", "false_branch")}
    hoisted = hoist_constants(b, list(branches.values()))
    grads = b.emit("cond", [node.inputs[0], *node.inputs[1:], *cotangents, *hoisted], branches)
    out = [None] * len(node.inputs)
    for i, grad in zip(wrt, grads):
        out[1 + i] = grad
    return out


register(OpDef(
    "cond", _infer_cond, attrs={"true_branch": Attr("graph"), "false_branch": Attr("graph")},
    inputs=(1, None), vjp=_vjp_cond, doc="runs one of two bodies, chosen at run time by a one-element predicate"))


# ---- scan ---------------------------------------------------------------------------------------
def split_scan(items, attrs) -> tuple:
    """``(init, xs, consts)`` of a scan's inputs (or of their types)."""
    c, x = attrs["carries"], attrs["scanned"]
    return list(items[:c]), list(items[c:c + x]), list(items[c + x:])


def step_type(ttype: TensorType, dim: int) -> TensorType:
    """The type of one position of a scanned input."""
    return ttype.with_shape(ttype.shape[:dim] + ttype.shape[dim + 1:])


def _infer_scan(in_types, attrs):
    init, xs, consts = split_scan(in_types, attrs)
    dim, body = attrs["dim"], attrs["body"]
    if not xs:
        raise ShapeError("scan needs at least one scanned input")
    if any(t.rank <= dim for t in xs):
        raise ShapeError(f"scan: dim={dim} is out of range for the scanned inputs {_show(xs)}")
    length = xs[0].shape[dim]
    if any(t.shape[dim] != length for t in xs):
        raise ShapeError(f"scan: the scanned inputs have different lengths along dim {dim}: {_show(xs)}")
    _check_reads("scan", "step", body, [*init, *(step_type(t, dim) for t in xs), *consts])
    outs = _types(body.outputs)
    if outs[:len(init)] != init:
        raise ShapeError(f"scan: the step returns carries {_show(outs[:len(init)])}, it was given {_show(init)}")
    ys = outs[len(init):]
    if any(t.rank < dim for t in ys):
        raise ShapeError(f"scan: dim={dim} is out of range for the step's outputs {_show(ys)}")
    stacked = [t.with_shape(t.shape[:dim] + (length,) + t.shape[dim:]) for t in ys]
    saved = [t.with_shape((length,) + t.shape) for t in init] if attrs["saves"] else []
    return [*init, *stacked, *saved]


def _move(b, value: Value, source: int, target: int) -> Value:
    """``value`` with dim ``source`` moved to ``target`` (torch.movedim), or itself."""
    if source == target:
        return value
    order = [d for d in range(value.type.rank) if d != source]
    order.insert(target, source)
    return b.emit1("permute", [value], {"perm": order})


def _saved_carries(b, node: Node) -> list:
    """The carries each position saw: the forward scan, replaced in place by its saving twin
    (one forward pass, not two); a scan not in the graph being built runs again, saving."""
    c = node.attrs["carries"]
    if node.attrs["saves"]:
        return node.outputs[len(node.outputs) - c:]
    attrs = {**node.attrs, "saves": True}
    saved = [Value(b.fresh_name(), t) for t in _infer_scan(_types(node.inputs), attrs)[len(node.outputs):]]
    twin = Node("scan", node.inputs, [*node.outputs, *saved], attrs, {**node.meta, "saves_for": "autodiff"})
    nodes = b.graph.nodes
    index = next((i for i, n in enumerate(nodes) if n is node), None)
    if index is None:
        twin.outputs = [Value(b.fresh_name(), v.type) for v in node.outputs] + saved
        nodes.append(twin)
    else:
        nodes[index] = twin
    return saved


def _vjp_scan(b, node, cts, needs):
    attrs = node.attrs
    init, xs, consts = split_scan(node.inputs, attrs)
    n_c, dim = len(init), attrs["dim"]
    ys = node.outputs[n_c:len(attrs["body"].outputs)]
    float_c = differentiable(init)
    need_x = [i for i in range(len(xs)) if needs[n_c + i]]
    need_k = [i for i in range(len(consts)) if needs[n_c + len(xs) + i]]
    float_y = differentiable(ys)
    saved = _saved_carries(b, node)
    step = vjp_body(attrs["body"], [*float_c, *(n_c + len(xs) + i for i in need_k), *(n_c + i for i in need_x)],
                    f"{attrs['body'].name}.vjp")
    backward = _backward_step(step, init, xs, consts, float_c, float_y, need_k, dim)
    ct_carry = [cts[i] if cts[i] is not None else zeros_like(b, node.outputs[i]) for i in float_c]
    ct_ys = [_move(b, cts[n_c + i] if cts[n_c + i] is not None else zeros_like(b, ys[i]), dim, 0) for i in float_y]
    hoisted = hoist_constants(b, [backward])  # trailing consts of the reverse scan
    grads = b.emit("scan", [*ct_carry, *(zeros_like(b, consts[i]) for i in need_k), *saved,
                            *(_move(b, x, dim, 0) for x in xs), *ct_ys, *consts, *hoisted],
                   {"body": backward, "carries": len(float_c) + len(need_k),
                    "scanned": len(saved) + len(xs) + len(ct_ys), "dim": 0, "reverse": not attrs["reverse"]})
    out = [None] * len(node.inputs)
    for i, grad in zip(float_c, grads):
        out[i] = grad if needs[i] else None
    for i, grad in zip(need_k, grads[len(float_c):]):
        out[n_c + len(xs) + i] = grad
    for i, grad in zip(need_x, grads[len(float_c) + len(need_k):]):
        out[n_c + i] = _move(b, grad, 0, dim)
    return out


def _backward_step(step: Graph, init, xs, consts, float_c, float_y, need_k, dim) -> Graph:
    """One position of the reverse scan: (ct carries, summed const grads | saved carries, xs,
    ct ys | consts) -> (ct of the carries before, const grads so far | x grads)."""
    from ..builder import Builder

    g = Graph(step.name.replace(".vjp", ".backward"))
    builder = Builder(g)

    def fresh(prefix, values, of_step=False):
        made = []
        for v in values:
            made.append(g.add_input(Value(g.unique_name(prefix), step_type(v.type, dim) if of_step else v.type)))
            builder.reserve(made[-1].name)
        return made
    ct_c = fresh("ct_carry", [init[i] for i in float_c])
    acc = fresh("grad_const", [consts[i] for i in need_k])
    carry_t = fresh("carry", init)
    x_t = fresh("x", xs, of_step=True)
    ct_y = [g.add_input(Value(g.unique_name("ct_y"), step.inputs[len(step.inputs) - len(float_y) + k].type))
            for k in range(len(float_y))]
    for v in ct_y:
        builder.reserve(v.name)
    k = fresh("const", consts)
    results = builder.inline(step, [*carry_t, *x_t, *k, *ct_c, *ct_y])
    n_c, n_k = len(float_c), len(need_k)
    sums = [builder.emit1("add", [a, r]) for a, r in zip(acc, results[n_c:n_c + n_k])]
    g.outputs = [*results[:n_c], *sums, *results[n_c + n_k:]]
    return g


register(OpDef(
    "scan", _infer_scan,
    attrs={"body": Attr("graph"), "carries": Attr("int", minimum=0), "scanned": Attr("int", minimum=1),
           "dim": Attr("int", 0, minimum=0), "reverse": Attr("bool", False), "saves": Attr("bool", False)},
    inputs=(1, None), vjp=_vjp_scan,
    differentiable_outputs=lambda attrs: None if not attrs.get("saves") else tuple(
        range(len(attrs["body"].outputs))),  # not the saved carries
    doc="a loop over positions of a dim: one body run per position, carries threaded through"))


# ---- while_loop ---------------------------------------------------------------------------------
def _infer_while(in_types, attrs):
    n = attrs["carried"]
    carried = list(in_types[:n])
    _check_reads("while_loop", "cond", attrs["cond"], list(in_types))
    _check_reads("while_loop", "body", attrs["body"], list(in_types))
    outs = _types(attrs["cond"].outputs)
    if len(outs) != 1:
        raise ShapeError(f"while_loop: its cond body must return one value, got {_show(outs)}")
    _one_element("while_loop", "the cond body's result", outs[0])
    if _types(attrs["body"].outputs) != carried:
        raise ShapeError(f"while_loop: the body returns {_show(_types(attrs['body'].outputs))}, it is given "
                         f"{_show(carried)} (the carried values keep their types)")
    return carried


register(OpDef(
    "while_loop", _infer_while,
    attrs={"cond": Attr("graph"), "body": Attr("graph"), "carried": Attr("int", minimum=0)},
    inputs=(0, None), doc="runs its body while its cond body returns true",
    no_gradient="a compiled while_loop has no gradient: its trip count is known only at run time (eagerly it runs as "
                "Python and has one); use gc.scan for a loop with a fixed number of steps, or keep the loop off the "
                "loss's path"))
