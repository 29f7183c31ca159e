"""ONNX interchange: ``gc.export(model, example, "model.onnx")`` writes a frozen inference
graph as an ONNX model (``export``, with PyTorch's number semantics spelled out in ONNX ops by
``export_numbers``), and ``gc.load("model.onnx")`` imports one as a plan (``importer``: the
file's checks and the table of readers; ``graph_reader``: the graph, node by node; ``readers``,
``elementwise_readers``, ``shape_readers``: one function per ONNX op; ``external``: external
data read only from the model's own folder).
Control flow has a file each way: ``control_export`` writes ``cond``/``scan``/``while_loop`` as
``If``/``Scan``/``Loop``, ``control_import`` reads those back, subgraphs' outer-scope names
becoming the nodes' captured operands.
``dtypes`` is the one table of element types. The ``onnx`` package is an optional extra,
imported only when a file is read or written. ``gc.onnx.export`` is PyTorch's
``torch.onnx.export`` (``torch_export``); the writer module stays importable as
``from graphc.onnx.export import save_onnx``.
"""
from . import export as _writer  # noqa: E402,F401  (loaded first: the name `export` below is then the function)
from .torch_export import export  # noqa: E402  (torch.onnx.export's arguments; imports onnx only when called)

del _writer
__all__ = ["export"]
