"""``custom_call``: a user's custom op (``gc.custom_op``) as one node whose bodies are graphs.

The node holds its forward and backward as data, as ONNX holds a subgraph in a GRAPH attr:
``forward`` maps the node's inputs to its outputs (the user's outputs first, then the
intermediates the backward saved); ``backward`` takes the node's inputs, all its outputs
and one cotangent per user output, and returns the gradients of the inputs listed in
``grads`` (None: no input has one). Both were traced once from the user's Python and hold
registry ops only (possibly other custom_calls), no state and no constants (constants became
inputs of the node), so a plan that uses a custom op loads and runs without the user's code.
Its vjp is a custom_call of the backward body: autodiff uses the user's gradient, never the
forward body's ops. ``differentiable`` is False for a backward's own call and for an op whose
backward is not defined: their vjp is an error, never a silent zero.
"""
from __future__ import annotations

from ..errors import GraphcError, ShapeError
from ..registry import Attr, OpDef, register


def _infer(in_types, attrs):
    body = attrs["forward"]
    want = [v.type for v in body.inputs]
    if list(in_types) != want:
        got = ", ".join(str(t) for t in in_types)
        raise ShapeError(f"custom op {attrs['name']!r} was traced for inputs ({', '.join(str(t) for t in want)}), "
                         f"got ({got})")
    if not 0 <= attrs["outputs"] <= len(body.outputs):
        raise ShapeError(f"custom op {attrs['name']!r}: outputs={attrs['outputs']} but its body has "
                         f"{len(body.outputs)} outputs")
    backward = attrs["backward"]
    if backward is not None:
        _check_backward(attrs, body, backward)
    elif attrs["grads"]:
        raise ShapeError(f"custom op {attrs['name']!r}: grads={list(attrs['grads'])} but no backward body")
    return [v.type for v in body.outputs]


def _check_backward(attrs, body, backward) -> None:
    """The backward body must read (inputs, outputs, cotangents) and return one gradient per
    entry of ``grads``, each of its input's type (checked here too: bodies come from files)."""
    name, user = attrs["name"], body.outputs[:attrs["outputs"]]
    want = [v.type for v in [*body.inputs, *body.outputs, *user]]
    if [v.type for v in backward.inputs] != want:
        raise ShapeError(f"custom op {name!r}: its backward body does not read (inputs, outputs, cotangents)")
    grads = attrs["grads"]
    if len(grads) != len(backward.outputs) or len(set(grads)) != len(grads) or any(
            i >= len(body.inputs) or backward.outputs[k].type != body.inputs[i].type for k, i in enumerate(grads)):
        raise ShapeError(f"custom op {name!r}: grads={list(grads)} does not match its backward body's outputs")


def _vjp(b, node, cts, needs):
    """The user's backward as a second custom_call: (inputs, outputs, cotangents) -> grads."""
    attrs = node.attrs
    backward = attrs["backward"]
    if not attrs["differentiable"]:  # an error rather than a silent zero
        raise GraphcError(f"custom op {attrs['name']!r} has no gradient: its backward is not defined, or it is the "
                          "backward of another custom op (no second derivatives through a custom op)")
    if backward is None or not attrs["grads"]:  # the user's backward returned None for every input
        return [None] * len(node.inputs)
    user = node.outputs[:attrs["outputs"]]
    cotangents = [ct if ct is not None else b.emit1("full", [], {"shape": list(v.type.shape), "value": 0.0,
                                                                  "dtype": v.type.dtype.name})
                  for v, ct in zip(user, cts)]
    grads = b.emit("custom_call", [*node.inputs, *node.outputs, *cotangents],
                   {"name": f"{attrs['name']}.backward", "forward": backward, "backward": None,
                    "outputs": len(backward.outputs), "grads": (), "differentiable": False})
    out = [None] * len(node.inputs)
    for index, grad in zip(attrs["grads"], grads):
        out[index] = grad
    return out


register(OpDef(
    "custom_call", _infer,
    attrs={"name": Attr("str"), "forward": Attr("graph"), "backward": Attr("graph", None, optional=True),
           "outputs": Attr("int", minimum=0), "grads": Attr("ints", (), minimum=0),
           "differentiable": Attr("bool", True)},
    inputs=(0, None), vjp=_vjp,
    differentiable_outputs=lambda attrs: tuple(range(attrs["outputs"])),  # not the saved intermediates
    doc="a custom op: its forward and backward bodies are graphs stored in the node"))
