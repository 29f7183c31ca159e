"""An imported model whose shapes depend on the values of some of its inputs.

ONNX lets a model take its shapes, axes, pads or sizes as ordinary inputs (``Reshape(x,
shape)`` with ``shape`` fed at run time), or compute them from inputs. graphc's plans have
static shapes (apart from symbolic dims such as the batch), so such a model is imported once
per distinct value of those inputs: :class:`ValueSpecializedPlan` reads the values at each call,
imports the model with them fixed (``static_values`` folds what they determine) and keeps the
plans it made, as ``torch.compile`` specializes on the Python ints it is called with. The other
inputs stay inputs of the plan, with their symbolic dims; a call with values seen before reuses
that plan. Inputs found to matter only when a later node needs them are added as they are found.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ..ir.errors import GraphcError, ShapeError
from .graph_reader import clean_name
from .static_values import NeedsInputValues

MAX_PLANS = 8  # plans kept, least recently used dropped first


class ValueSpecializedPlan:
    """Run an imported ONNX model specialized on the values of ``value_inputs`` (see the module
    docstring). Called like a ``Plan``: ``plan(*inputs)`` or ``plan(name=array, ...)``.

    >>> import numpy as np, onnx, graphc as gc, tempfile, os
    >>> from onnx import helper, TensorProto as T
    >>> node = helper.make_node("Reshape", ["x", "shape"], ["y"])
    >>> g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 3]),
    ...     helper.make_tensor_value_info("shape", T.INT64, [2])], [helper.make_tensor_value_info("y", T.FLOAT, None)])
    >>> path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    >>> onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), path)
    >>> plan = gc.load(path)
    >>> plan(np.ones((2, 3), np.float32), np.array([3, 2])).shape, plan.value_inputs
    ((3, 2), ['shape'])
    """

    kind = "inference"

    def __init__(self, build, input_names: list, output_names: list, value_inputs, device: str):
        self._build = build  # {ONNX input name: array} -> the Plan for those values
        self.onnx_inputs = list(input_names)
        self.input_names = [clean_name(n, f"input{i}") for i, n in enumerate(self.onnx_inputs)]
        self.output_names = list(output_names)
        self._values = set(value_inputs)
        self.device = device
        self.producer = None
        self._plans: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._last = None

    @property
    def value_inputs(self) -> list:
        """The inputs whose values the plan is specialized on, in the model's input order."""
        return [n for n in self.onnx_inputs if n in self._values]

    @property
    def graph(self):
        """The graph of the plan made at the last call (there is none before the first)."""
        if self._last is None:
            raise GraphcError(f"this model's shapes depend on the values of input(s) {', '.join(self.value_inputs)}: "
                              "its graph exists once they are known; call the plan, or plan.specialize(*inputs)")
        return self._last.graph

    def specialize(self, *inputs, **named):
        """The ``Plan`` for these inputs' values (it takes the other inputs only)."""
        arrays = self._arrays(inputs, named)
        return self._plan_for(arrays)

    def __call__(self, *inputs, **named):
        arrays = self._arrays(inputs, named)
        plan = self._plan_for(arrays)
        return plan(*[a for n, a in zip(self.onnx_inputs, arrays) if n not in self._values])

    def run(self, inputs: list) -> list:
        arrays = self._arrays(inputs, {})
        plan = self._plan_for(arrays)
        return plan.run([a for n, a in zip(self.onnx_inputs, arrays) if n not in self._values])

    def save(self, path, *args, **kwargs):
        raise GraphcError(f"this model's shapes depend on the values of input(s) {', '.join(self.value_inputs)}, so "
                          "it has no single plan to save; save plan.specialize(*inputs) for one set of values")

    def _arrays(self, inputs, named) -> list:
        if named:
            by_name = dict(zip(self.input_names, inputs))
            unknown = sorted(set(named) - set(self.input_names) - set(self.onnx_inputs))
            if unknown:
                raise ShapeError(f"unknown input name(s) {unknown}; this plan takes {self.input_names}")
            for clean, onnx_name in zip(self.input_names, self.onnx_inputs):
                if onnx_name in named or clean in named:
                    by_name[clean] = named.get(onnx_name, named.get(clean))
            missing = [n for n in self.input_names if n not in by_name]
            if missing:
                raise ShapeError(f"missing input(s) {missing}; this plan takes {self.input_names}")
            inputs = [by_name[n] for n in self.input_names]
        if len(inputs) != len(self.onnx_inputs):
            raise ShapeError(f"plan takes {len(self.onnx_inputs)} input(s) ({', '.join(self.input_names)}), "
                             f"got {len(inputs)}")
        return [np.asarray(x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else x)
                for x in inputs]

    def _plan_for(self, arrays: list):
        for _ in range(len(self.onnx_inputs) + 1):  # each retry learns at least one more value input
            values = {n: a for n, a in zip(self.onnx_inputs, arrays) if n in self._values}
            key = tuple((n, a.dtype.str, a.shape, a.tobytes()) for n, a in sorted(values.items()))
            with self._lock:
                plan = self._plans.get(key)
                if plan is not None:
                    self._plans.move_to_end(key)
                    self._last = plan
                    return plan
            try:
                plan = self._build(values)
            except NeedsInputValues as e:
                new = set(e.names) - self._values
                if not new or not new <= set(self.onnx_inputs):
                    raise GraphcError(e.message, e.where) from None
                self._values |= new
                continue
            with self._lock:
                self._plans[key] = plan
                while len(self._plans) > MAX_PLANS:
                    self._plans.popitem(last=False)
                self._last = plan
            return plan
        raise GraphcError("the import kept asking for more input values")  # unreachable: inputs are finite
