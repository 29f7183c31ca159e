"""Python branches on traced values: trace both sides and join them in a ``cond`` node.

When traced code asks a traced boolean for its Python value (``if t:``, ``a if t else b``,
``and``/``or``), the tracer raises :class:`~graphc.core.tracer.Undecided`; this driver then
traces the whole function again with that decision forced to True, and again forced to
False (deeper decisions the same way, recursively), and joins each pair of traces where they
part (``ir/join.py``). The function runs once per path (2**k times for k decisions along a
path, at most :data:`MAX_DECISIONS` along one), so Python code in it should not count calls.
Between runs the models' ``.grad`` and plain Python attributes are put back as they were;
sides that leave those attributes different cannot be one graph, and are refused.
"""
from __future__ import annotations

import warnings
from collections import Counter

from .core.tracer import Undecided
from .ir.errors import TraceError
from .ir.graph import describe_location
from .ir.join import join_traces

MAX_DECISIONS = 8  # traced booleans asked along one path: 2**8 traces at most

PLAIN = (bool, int, float, str, type(None))


class _MoreGradients(Exception):
    """The two sides of a branch differentiate different parameters: trace again, every side
    differentiating all of them (zeros on the side that does not use one)."""

    def __init__(self, names: frozenset):
        super().__init__(sorted(names))
        self.names = names


def trace_both_ways(attempt, root):
    """``attempt(decisions, also_differentiate) -> (graph, tracer)`` traces the function once
    with the first traced booleans answered by ``decisions``; returns the joined ``(graph,
    tracer)``. Warnings are those of the last, successful round, once each."""
    also = frozenset()
    for _ in range(3):
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = _explore_all(attempt, root, also)
        except _MoreGradients as more:
            also = also | more.names
            continue
        seen = set()
        for w in caught:
            if (str(w.message), w.filename, w.lineno) not in seen:
                seen.add((str(w.message), w.filename, w.lineno))
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return result
    raise TraceError("the branches' gradients did not settle after tracing them three times")


def _explore_all(attempt, root, also: frozenset):
    grads = [(p, p.grad) for p in root.parameters()] if root is not None else []
    attributes = _python_state(root)

    def explore(decisions: list):
        for p, grad in grads:
            p.grad = grad
        _restore(root, attributes)
        try:
            graph, tracer = attempt(decisions, also)
        except Undecided as undecided:
            asked = undecided
        except TraceError:
            raise
        except Exception as e:
            if not decisions:
                raise
            raise _on_a_side(e, decisions) from e
        else:
            tracer.python_state = _python_state(root)
            return graph, tracer
        return _fork(explore, decisions, asked)  # outside the except: errors of the sides chain to nothing
    return explore([])


def _fork(explore, decisions, undecided):
    position = undecided.position
    if position >= MAX_DECISIONS:
        raise _too_many(undecided.asked)
    graph_t, tracer_t = explore(decisions + [True])
    graph_f, tracer_f = explore(decisions + [False])
    pred_t, meta = tracer_t.asked[position]
    pred_f = tracer_f.asked[position][0]
    where = describe_location(meta)
    _same_python_state(tracer_t.python_state, tracer_f.python_state, where)
    _same_gradients(tracer_t, tracer_f, where)
    _same_steps(graph_t.meta.get("training"), graph_f.meta.get("training"), where)
    if graph_t.meta.get("none_outputs") != graph_f.meta.get("none_outputs"):
        raise TraceError("the two sides of the branch return None at different places", where)
    joined, rename = join_traces(graph_t, graph_f, (pred_t, pred_f), where, meta)
    training = joined.meta.get("training")
    if training is not None and rename:
        joined.meta["training"] = {
            **training, "losses": [rename.get(n, n) for n in training["losses"]],
            "placeholders": [{**e, "loss": rename.get(e["loss"], e["loss"])} for e in training["placeholders"]]}
    fixed = graph_t.meta.get("fixed_batch") or graph_f.meta.get("fixed_batch")
    if fixed:
        joined.meta["fixed_batch"] = fixed
    tracer_t.graph = joined
    return joined, tracer_t


def _on_a_side(error: Exception, decisions: list) -> TraceError:
    """A side of a branch that fails when traced (an ``assert`` or ``raise`` on the side the
    example does not take): say which, since the plan must hold both."""
    side = "true" if decisions[-1] else "false"
    return TraceError(f"tracing the {side} side of a branch on a traced value raised {type(error).__name__}: {error}; "
                      "a compiled function holds both sides of every such branch, so a check that fails on one side "
                      "(an assert, a raise) cannot be compiled: move it out of the compiled function, or use "
                      "gc.cond/gc.where")


def _too_many(asked: list) -> TraceError:
    places = Counter(describe_location(meta) or "?" for meta in asked)
    place, count = places.most_common(1)[0]
    if count > 1:
        return TraceError(f"a Python loop on a traced value ({place} asked {count} times along one path, more than "
                          f"{MAX_DECISIONS} branches in all): a compiled loop must be a graph op, use gc.while_loop "
                          "(or gc.scan for a fixed number of steps), or gc.where for a branch inside a loop")
    return TraceError(f"more than {MAX_DECISIONS} Python branches on traced values along one path: use gc.cond or "
                      f"gc.where for some of them (the last at {place})")


def _same_gradients(tracer_t, tracer_f, where) -> None:
    """Each side's backward() differentiates the parameters its loss reaches; where those
    differ, both sides must differentiate all of them (zeros where a side does not use one),
    which is PyTorch's update only where a zero gradient changes nothing."""
    def params(tracer):
        return {e["param"] for e in tracer.graph.meta.get("training", {}).get("placeholders", [])}
    left, right = params(tracer_t), params(tracer_f)
    if left == right:
        return
    names = {id(t): name for name, t in tracer_t.state_tensors.items()}
    only = left ^ right
    for optimizer in tracer_t.optimizers or tracer_f.optimizers:
        for group in optimizer.param_groups:
            if not optimizer.zero_gradient_keeps(group) and any(names.get(id(p)) in only for p in group["params"]):
                raise TraceError(
                    f"only one side of the branch uses {', '.join(sorted(only))}: compiled, the other side gives it a "
                    f"zero gradient, and {type(optimizer).__name__} (momentum, weight decay or running moments) moves "
                    "a parameter even then, where PyTorch skips a parameter with no gradient; use plain SGD, or "
                    "make both sides use the same parameters (multiply the unused one by 0)", where)
    raise _MoreGradients(frozenset(left | right))


def _same_steps(meta_t, meta_f, where) -> None:
    def shape(meta):
        if not meta:
            return None
        return ([(e["param"], e["value"]) for e in meta.get("placeholders", [])], len(meta.get("stepped", [])))
    if shape(meta_t) != shape(meta_f):
        raise TraceError("the two sides of the branch run backward() or optimizer.step() differently; call them after "
                         "the branch (on the value it chose)", where)


def _python_state(root) -> dict:
    """Plain Python attributes of the model's modules (counters, flags, train/eval mode)."""
    if root is None:
        return {}
    return {(path, key): value for path, module in root.named_modules() for key, value in vars(module).items()
            if not key.startswith("_") and isinstance(value, PLAIN)}


def _restore(root, state: dict) -> None:
    if root is None:
        return
    modules = dict(root.named_modules())
    for (path, key), value in state.items():
        object.__setattr__(modules[path], key, value)


def _same_python_state(state_t: dict, state_f: dict, where) -> None:
    for key in dict.fromkeys([*state_t, *state_f]):
        if state_t.get(key) != state_f.get(key):
            path, attr = key
            name = f"{path}.{attr}" if path else attr
            raise TraceError(f"the two sides of the branch leave the Python attribute {name} different "
                             f"({state_t.get(key)!r} and {state_f.get(key)!r}); a compiled branch can choose only "
                             "between tensor values: keep it in a buffer, or use gc.cond", where)
