"""The graph-meta fields a plan file carries, checked as plain data before graphc reads them:
pass records, pinned sizes (``fixed_batch``, ``fixed_dims``), guards on Python-number inputs,
the trees that nest a call's inputs and outputs; and how a call's arrays are read and described."""
from __future__ import annotations

from ..ir.errors import ShapeError
from ..ir.types import is_symbol
from .plan_limits import MAX_DIM_TEXT, MAX_IO, MAX_RANK, fail

MAX_TREE_DEPTH = 16


def is_int(obj) -> bool:
    return isinstance(obj, int) and not isinstance(obj, bool)


def check_call_trees(graph) -> None:
    """``input_tree`` and ``output_tree`` must nest the graph's own inputs and outputs."""
    inputs = graph.meta.get("input_tree")
    if inputs is not None and not (isinstance(inputs, list) and len(inputs) <= len(graph.inputs)
                                   and all(_input_tree_ok(t, 0) for t in inputs)
                                   and _leaves(inputs) <= len(graph.inputs)):
        fail("graph.meta.input_tree should nest the inputs in lists (0 for a tensor), at most 16 deep")
    gradients = len(graph.meta.get("gradients", []))  # trailing outputs the plan keeps (plan._take_gradients)
    if gradients >= len(graph.outputs) > 0:
        fail("graph.meta.gradients names more gradients than the graph has outputs besides the function's own")
    outputs = graph.meta.get("output_tree")
    count = len(graph.outputs) - gradients + len(graph.meta.get("none_outputs", []))
    if outputs is not None and not _output_tree_ok(outputs, count, 0):
        fail("graph.meta.output_tree should nest the positions of the outputs in lists (and [\"dict\", keys, "
             "subtrees]), at most 16 deep")


def _input_tree_ok(tree, depth: int) -> bool:
    if depth > MAX_TREE_DEPTH:
        return False
    if tree == 0 and is_int(tree):
        return True
    return isinstance(tree, list) and 0 < len(tree) <= MAX_IO and all(_input_tree_ok(t, depth + 1) for t in tree)


def _leaves(tree) -> int:
    return 1 if not isinstance(tree, list) else sum(_leaves(t) for t in tree)


def _output_tree_ok(tree, count: int, depth: int) -> bool:
    """A tree of output positions (below ``count``), lists and ``["dict", keys, subtrees]``."""
    if depth > MAX_TREE_DEPTH:
        return False
    if is_int(tree):
        return 0 <= tree < count
    if not isinstance(tree, list) or len(tree) > MAX_IO:
        return False
    if tree and tree[0] == "dict":
        return (len(tree) == 3 and isinstance(tree[1], list) and isinstance(tree[2], list)
                and len(tree[1]) == len(tree[2]) and all(isinstance(k, str) for k in tree[1])
                and all(_output_tree_ok(t, count, depth + 1) for t in tree[2]))
    return all(_output_tree_ok(t, count, depth + 1) for t in tree)


def check_meta(meta: dict) -> dict:
    """The graph-meta fields graphc reads back must have the shapes it writes."""
    passes = meta.get("passes", [])
    if not isinstance(passes, list) or not all(
            isinstance(p, dict) and isinstance(p.get("name"), str)
            and all(is_int(p.get(k)) for k in ("nodes_before", "nodes_after"))
            for p in passes):
        fail("graph.meta.passes should be a list of {name, nodes_before, nodes_after}")
    fixed = meta.get("fixed_batch")
    if fixed is not None and not (isinstance(fixed, dict) and isinstance(fixed.get("size"), int)
                                  and isinstance(fixed.get("where"), str)):
        fail("graph.meta.fixed_batch should be {size, where}")
    fixed_dims = meta.get("fixed_dims", {})
    if not (isinstance(fixed_dims, dict) and len(fixed_dims) <= MAX_RANK and all(
            is_symbol(k) and len(k) <= MAX_DIM_TEXT and isinstance(v, dict) and is_int(v.get("size"))
            and isinstance(v.get("where"), str) for k, v in fixed_dims.items())):
        fail("graph.meta.fixed_dims should map symbols to {size, where}")
    guards = meta.get("guards", {})
    if not (isinstance(guards, dict) and len(guards) <= MAX_IO and all(
            isinstance(k, str) and isinstance(v, dict) and type(v.get("value")) in (int, float, bool)
            and isinstance(v.get("where"), str) for k, v in guards.items())):
        fail("graph.meta.guards should map input names to {value, where}")
    hyper = meta.get("hyper_inputs", [])
    if not isinstance(hyper, list) or not all(isinstance(h, str) for h in hyper):
        fail("graph.meta.hyper_inputs should be a list of input names")
    nones = meta.get("none_outputs", [])
    if not (isinstance(nones, list) and len(nones) <= MAX_IO and all(type(i) is int and i >= 0 for i in nones)
            and nones == sorted(set(nones))):
        fail("graph.meta.none_outputs should be an increasing list of output positions")
    checks = meta.get("verification", [])  # verify="numeric": one record per pass
    if not isinstance(checks, list) or not all(isinstance(c, dict) and isinstance(c.get("pass"), str) for c in checks):
        fail("graph.meta.verification should be a list of {pass, dtype, max_abs, max_rel, ...} records")
    gradients = meta.get("gradients", [])
    if not isinstance(gradients, list) or not all(
            isinstance(g, dict) and isinstance(g.get("param"), str) and isinstance(g.get("accumulates"), bool)
            for g in gradients):
        fail("graph.meta.gradients should be a list of {param, accumulates}")
    if meta.get("returns", "all") != "all":
        fail("graph.meta.returns should be 'all' (a compiled step function) or absent")
    return meta


def nest_outputs(tree, outputs: list):
    """The outputs nested along ``tree`` (graphc/tracing.py's ``_flat_outputs``)."""
    if isinstance(tree, int):
        return outputs[tree]
    if tree and tree[0] == "dict":
        return {key: nest_outputs(sub, outputs) for key, sub in zip(tree[1], tree[2])}
    return tuple(nest_outputs(sub, outputs) for sub in tree)


def flat_call_inputs(tree, inputs) -> list:
    """A call's inputs flattened along ``tree`` (0: a tensor; a list: a tuple of that many)."""
    if len(inputs) != len(tree):
        raise ShapeError(f"plan takes {len(tree)} input(s), got {len(inputs)}")
    out = []

    def walk(t, item, where):
        if t == 0:
            out.append(item)
            return
        if not isinstance(item, (tuple, list)) or len(item) != len(t):
            got = f"a {type(item).__name__}" + (f" of {len(item)}" if isinstance(item, (tuple, list)) else "")
            raise ShapeError(f"input {where}: expected a tuple of {len(t)}, got {got}")
        for i, (s, v) in enumerate(zip(t, item)):
            walk(s, v, f"{where}[{i}]")
    for index, (t, item) in enumerate(zip(tree, inputs)):
        walk(t, item, str(index))
    return out


def tensor_array(data):
    """The array behind an eager ``gc.Tensor`` (numpy or cupy), else None. The executor does
    not import graphc's user API (the layering), so the Tensor is known by its type and its
    documented ``array`` attribute: reading it directly keeps a cupy-backed Tensor on its GPU,
    where ``np.asarray(tensor)`` would copy it to the host and back. A traced Tensor (no
    array) falls through to ``__array__``, which explains why it cannot be a plan input."""
    kind = type(data)
    if not any(k.__name__ == "Tensor" and k.__module__ == "graphc.core.tensor" for k in kind.__mro__):
        return None
    backing = getattr(data, "array", None)
    return backing if hasattr(backing, "shape") and hasattr(backing, "dtype") else None


def describe_array(a) -> str:
    from ..ir.types import DType

    try:
        dtype = DType.from_any(a.dtype).short
    except Exception:
        dtype = str(a.dtype)
    return f"{dtype}[{','.join(str(d) for d in a.shape)}]"

