"""graphc as an ONNX backend (``onnx.backend.base.Backend``): what onnx's backend test suite
and other ONNX tools call. ``prepare`` imports a ModelProto as a graphc plan (the same import
as ``gc.load("model.onnx")``); ``run`` feeds it numpy arrays and returns its outputs.

>>> import numpy as np, onnx
>>> from onnx import helper, TensorProto as T
>>> import graphc.onnx.backend as backend
>>> node = helper.make_node("Relu", ["x"], ["y"])
>>> graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", T.FLOAT, [2])],
...                           [helper.make_tensor_value_info("y", T.FLOAT, [2])])
>>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
>>> backend.run_model(model, [np.array([-1.0, 2.0], np.float32)])[0].tolist()
[0.0, 2.0]

onnx's own runner takes it as it is: ``onnx.backend.test.BackendTest(graphc.onnx.backend,
__name__)`` (tests/onnx_backend_run.py runs the same cases with a report of its own).
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from .importer import import_model


class GraphcRep(BackendRep):
    """A prepared model: ``run(inputs)`` with a list (in the graph's input order) or a dict by name."""

    def __init__(self, plan, output_names: list):
        self.plan = plan
        self.output_names = output_names

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            outputs = self.plan(**inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            outputs = self.plan(*inputs)
        if not isinstance(outputs, tuple) or len(self.output_names) == 1:
            outputs = (outputs,)
        outputs = [o if isinstance(o, list) else np.asarray(o) for o in outputs]
        return namedtupledict("Outputs", [f"output_{i}" for i in range(len(outputs))])(*outputs)


class GraphcBackend(Backend):
    """The graphc backend: CPU (numpy), and CUDA (cupy) where cupy and a GPU are present."""

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> GraphcRep:
        if isinstance(model, bytes):
            model = onnx.ModelProto.FromString(model)
        plan = import_model(model, model.graph.name or "model.onnx", _device(device))
        return GraphcRep(plan, [o.name for o in model.graph.output])

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        if Device(device).type == DeviceType.CPU:
            return True
        from ..cuda import is_available

        return is_available()


def _device(device: str) -> str:
    return "cuda" if Device(device).type == DeviceType.CUDA else "cpu"


prepare = GraphcBackend.prepare
run_model = GraphcBackend.run_model
supports_device = GraphcBackend.supports_device
is_compatible = GraphcBackend.is_compatible
run_node = GraphcBackend.run_node
