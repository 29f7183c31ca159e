"""``torch.onnx.export(model, args, f, input_names=..., output_names=..., dynamic_axes=...,
opset_version=...)`` for files written for PyTorch, over graphc's ONNX export
(``gc.export(model, example_inputs, "m.onnx", opset=..., dynamic_dims=...)``).

graphc's file always has a symbolic batch dim (dim 0 of the batched inputs, named ``N``),
where PyTorch's fixes every dim not in ``dynamic_axes``. ``dynamic_axes`` entries beyond dim 0
become graphc's ``dynamic_dims``; every named dim's symbol is renamed in the file to the name
given (dim 0 too). ``input_names``/``output_names`` rename the graph's inputs and outputs. A
keyword PyTorch has whose value graphc cannot honour is refused with a GraphcError naming it.

>>> import io, numpy as np, graphc as gc
>>> from graphc import nn
>>> f = io.BytesIO()
>>> gc.onnx.export(nn.Linear(4, 2), gc.zeros(3, 4), f, input_names=["x"], output_names=["y"],
...                dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
>>> import onnx
>>> m = onnx.load_from_string(f.getvalue())
>>> [i.name for i in m.graph.input], m.graph.output[0].type.tensor_type.shape.dim[0].dim_param
(['x'], 'batch')
"""
from __future__ import annotations

import os
import tempfile

from ..ir.errors import GraphcError

# PyTorch's keywords and the values graphc can honour (anything else is refused, by name)
_ACCEPTED = {"export_params": (True,), "training": (None, "EVAL", "TrainingMode.EVAL"),
             "keep_initializers_as_inputs": (None, False), "custom_opsets": (None, {}),
             "export_modules_as_functions": (False,), "dynamic_shapes": (None,), "kwargs": (None, {})}
_IGNORED = {"verbose", "do_constant_folding", "operator_export_type", "dynamo", "external_data", "report",
            "optimize", "verify", "profile", "dump_exported_program", "artifacts_dir", "fallback",
            "autograd_inlining", "opset_version", "input_names", "output_names", "dynamic_axes"}


def _check_keywords(options: dict) -> None:
    for key, value in options.items():
        if key in _ACCEPTED:
            text = str(value).split(".")[-1] if key == "training" and value is not None else value
            if text not in _ACCEPTED[key] and value not in _ACCEPTED[key]:
                raise GraphcError(f"torch.onnx.export: {key}={value!r} is not supported by graphc's ONNX export "
                                  f"(supported: {', '.join(repr(v) for v in _ACCEPTED[key])})")
        elif key not in _IGNORED:
            raise GraphcError(f"torch.onnx.export: unknown keyword {key!r}")


def _axes(spec, what: str) -> dict:
    """``{dim: name}`` from PyTorch's ``{0: "batch"}`` or ``[0, 1]`` (names made up)."""
    if isinstance(spec, dict):
        return {int(d): str(n) for d, n in spec.items()}
    if isinstance(spec, (list, tuple)):
        return {int(d): f"{what}_dynamic_axes_{i + 1}" for i, d in enumerate(spec)}
    raise GraphcError(f"torch.onnx.export: dynamic_axes[{what!r}] must be a dict or a list of dims, got {spec!r}")


def export(model, args, f, export_params=True, verbose=False, training=None, input_names=None, output_names=None,
           operator_export_type=None, opset_version=None, do_constant_folding=True, dynamic_axes=None,
           keep_initializers_as_inputs=None, custom_opsets=None, export_modules_as_functions=False, **options):
    """Write ``model`` run on ``args`` (a tensor or a tuple of them) as ONNX to ``f`` (a path or a
    binary file object), with PyTorch's ``torch.onnx.export`` arguments; see the module docstring."""
    from ..compile import export as gc_export
    from .export import onnx_module

    _check_keywords({"export_params": export_params, "training": training,
                     "keep_initializers_as_inputs": keep_initializers_as_inputs, "custom_opsets": custom_opsets,
                     "export_modules_as_functions": export_modules_as_functions, **options})
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    if args and isinstance(args[-1], dict):
        raise GraphcError("torch.onnx.export: keyword inputs (a trailing dict in args) are not supported; "
                          "pass every input positionally")
    input_names, output_names = list(input_names or []), list(output_names or [])
    if len(input_names) > len(args):
        raise GraphcError(f"torch.onnx.export: {len(input_names)} input_names for {len(args)} inputs")
    dims, renames, out_axes = {}, {}, {}
    for key, spec in (dynamic_axes or {}).items():
        axes = _axes(spec, key)
        if key in output_names:
            out_axes[output_names.index(key)] = axes
            continue
        if key not in input_names:
            raise GraphcError(f"torch.onnx.export: dynamic_axes names {key!r}, which is not in input_names "
                              f"{input_names} or output_names {output_names}")
        index = input_names.index(key)
        for dim, name in axes.items():
            symbol = "N" if dim == 0 else f"dyn{index}_{dim % len(args[index].shape)}"
            if dim != 0:
                dims.setdefault(index, {})[dim] = symbol
            renames[symbol] = name
    onnx = onnx_module()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        gc_export(model, args, path, opset=opset_version, dynamic_dims=dims or None)
        proto = onnx.load(path)
    _rename(proto.graph, input_names, output_names, renames, out_axes)
    onnx.checker.check_model(proto)
    data = proto.SerializeToString()
    if hasattr(f, "write"):
        f.write(data)
    else:
        with open(os.fspath(f), "wb") as out:
            out.write(data)


def _rename(graph, input_names, output_names, symbols: dict, out_axes: dict) -> None:
    """Rename the graph's inputs/outputs (every use, subgraphs too) and its dims' symbols."""
    names = {}
    for value, name in [*zip(graph.input, input_names), *zip(graph.output, output_names)]:
        if value.name != name:
            names[value.name] = name
    taken = {n for node in _nodes(graph) for n in [*node.input, *node.output]} | {i.name for i in graph.initializer}
    clash = sorted(set(names.values()) & (taken - set(names)))
    if clash:
        raise GraphcError(f"torch.onnx.export: names {clash} are already used inside the graph; choose others")
    for node in _nodes(graph):
        node.input[:] = [names.get(n, n) for n in node.input]
        node.output[:] = [names.get(n, n) for n in node.output]
    for value in [*graph.input, *graph.output, *graph.value_info]:
        value.name = names.get(value.name, value.name)
        for d in value.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in symbols:
                d.dim_param = symbols[d.dim_param]
    for index, axes in out_axes.items():
        shape = graph.output[index].type.tensor_type.shape.dim
        for dim, name in axes.items():
            if not shape[dim].HasField("dim_param"):
                raise GraphcError(f"torch.onnx.export: output {graph.output[index].name!r} dim {dim} has a fixed size "
                                  f"in graphc's graph; make the input dims it comes from dynamic")
            shape[dim].dim_param = name


def _nodes(graph):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in [*([attr.g] if attr.HasField("g") else []), *attr.graphs]:
                yield from _nodes(sub)
