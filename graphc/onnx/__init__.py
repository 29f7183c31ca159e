"""ONNX interchange: ``gc.export(model, example, "model.onnx")`` writes a frozen inference
graph as an ONNX model (``export``, with PyTorch's number semantics spelled out in ONNX ops by
``export_numbers``), and ``gc.load("model.onnx")`` imports one as a plan (``importer``: the
file's checks and the graph; ``readers``, ``elementwise_readers``, ``shape_readers``: one
function per ONNX op; ``external``: external data read only from the model's own folder).
``dtypes`` is the one table of element types. The ``onnx`` package is an optional extra,
imported only when a file is read or written.
"""
