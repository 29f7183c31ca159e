"""``ir.verify(graph)``: structural checks the pass manager runs after every pass in tests."""
from __future__ import annotations

from .errors import GraphcError, VerifyError
from .graph import Graph
from .registry import get_op, infer_types


def verify(graph: Graph, _checked: set | None = None) -> Graph:
    """Check SSA, topological order, known ops, attrs and types; return the graph.

    >>> from graphc.ir import Graph, verify
    >>> verify(Graph()).name
    'graph'
    """
    defined: dict[int, str] = {}
    names: set[str] = set()

    def define(value, where):
        if id(value) in defined:
            raise VerifyError(f"value %{value.name} defined twice ({defined[id(value)]} and {where})")
        if value.name in names:
            raise VerifyError(f"two values share the name %{value.name} ({where})")
        defined[id(value)] = where
        names.add(value.name)

    for v in graph.inputs:
        define(v, "graph input")
    for name, v in graph.state.items():
        if v.name != name:
            raise VerifyError(f"state entry {name!r} holds value %{v.name}")
        define(v, f"state {name}")
    for name, v in graph.constants.items():
        define(v, f"constant {name}")
        data = graph.constant_data.get(name)
        if data is None or tuple(data.shape) != v.type.shape or data.dtype != v.type.dtype.numpy:
            raise VerifyError(f"constant %{name} data does not match its type {v.type}")
    checked = set() if _checked is None else _checked  # each body once, however often it is called
    for index, node in enumerate(graph.nodes):
        _verify_node(node, index, defined)
        for key, body in node.attrs.items():
            if isinstance(body, Graph) and id(body) not in checked:
                checked.add(id(body))
                _verify_body(body, f"node {index} ({node.op}) {key}", node.location(), checked)
        for v in node.outputs:
            define(v, f"node {index} ({node.op})")
    for v in graph.root_values():
        if id(v) not in defined:
            raise VerifyError(f"graph output %{v.name} is never defined")
    for name, v in graph.updates.items():
        if name not in graph.state:
            raise VerifyError(f"update of unknown state {name!r}")
        if v.type != graph.state[name].type:
            raise VerifyError(f"update of {name!r} has type {v.type}, state is {graph.state[name].type}")
    return graph


def _verify_body(body: Graph, where: str, location, checked: set) -> None:
    """A body (a control-flow branch or step, a custom op's body) is a graph of its own that
    reads only its inputs: a value captured from outside must have been made an input."""
    if body.state or body.constants or body.updates:
        raise VerifyError(f"{where}: body {body.name!r} holds state or constants; a body reads only its inputs",
                          location)
    try:
        verify(body, checked)
    except VerifyError as e:
        raise VerifyError(f"{where}: body {body.name!r}: {e.message}", location) from None


def _verify_node(node, index, defined):
    where = node.location()
    try:
        opdef = get_op(node.op)
    except GraphcError as e:
        raise VerifyError(f"node {index}: {e.message}", where) from None
    for v in node.inputs:
        if id(v) not in defined:
            raise VerifyError(f"node {index} ({node.op}) reads %{v.name} before it is defined", where)
    try:
        attrs = opdef.normalize_attrs(node.attrs)
        expected = infer_types(opdef, [v.type for v in node.inputs], attrs)
    except GraphcError as e:
        raise VerifyError(f"node {index} ({node.op}): {e.message}", where) from None
    if attrs != node.attrs:
        raise VerifyError(f"node {index} ({node.op}): attrs {node.attrs} are not normalised", where)
    actual = [v.type for v in node.outputs]
    if actual != expected:
        raise VerifyError(f"node {index} ({node.op}): output types {[str(t) for t in actual]} "
                          f"differ from the rule's {[str(t) for t in expected]}", where)
