"""A compiled plan: a graph, its state (shared with the model) and a backend.

Calling a plan binds the batch size from the inputs, builds (once per batch size) a
:class:`~graphc.executor.program.Program`, runs it and writes state updates back in place.
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import ShapeError
from ..ir.graph import Graph
from ..ir.types import BATCH
from .backends import get_backend
from .program import Program


class Plan:
    """Run a compiled graph. Inference plans return the model's output(s).

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> model = nn.Linear(4, 2).eval()
    >>> infer = gc.compile(model, example_inputs=(np.zeros((8, 4), np.float32),))
    >>> infer(np.ones((3, 4), np.float32)).shape
    (3, 2)
    """

    def __init__(self, graph: Graph, state: dict, *, device="cpu", seed: int = 0, kind: str = "inference"):
        self.graph = graph
        self.kind = kind
        self.backend = get_backend(device)
        self.device = self.backend.name
        self._state = {name: state[name] for name in graph.state}
        self._constants = {k: self.backend.asarray(v) for k, v in graph.constant_data.items()}
        self.rng = np.random.default_rng(seed)
        self._programs: dict[int, Program] = {}
        self.input_names = [v.name for v in graph.inputs]
        self.output_names = list(graph.output_names) or [v.name for v in graph.outputs]

    # ---- running ----------------------------------------------------------------
    def __call__(self, *inputs):
        outputs = self.run(list(inputs))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def run(self, inputs: list) -> list:
        """Run once on a list of inputs; return the list of outputs."""
        arrays, batch = self._check_inputs(inputs)
        program = self._programs.get(batch)
        if program is None:
            program = self._programs[batch] = Program(self.graph, batch, self.backend, self.rng, self._constants)
        with np.errstate(all="ignore"):
            outs = program.run(arrays, self._state)
        return [self.backend.asarray(o) for o in outs]

    def _check_inputs(self, inputs: list):
        expected = self.graph.inputs
        if len(inputs) != len(expected):
            names = ", ".join(self.input_names)
            raise ShapeError(f"plan takes {len(expected)} input(s) ({names}), got {len(inputs)}")
        arrays = [self._as_array(a, v.name) for a, v in zip(inputs, expected)]
        batch = None
        for a, v in zip(arrays, expected):
            if v.type.rank and v.type.shape[0] == BATCH and a.ndim:
                batch = a.shape[0]
                break
        for a, v in zip(arrays, expected):
            want = v.type.bind(batch if batch is not None else 0)
            if a.dtype != want.dtype.numpy or tuple(a.shape) != want.shape:
                shown = str(v.type) + (f" (N={batch})" if batch is not None and not v.type.is_static else "")
                raise ShapeError(f"input {v.name!r}: expected {shown}, got {_describe(a)}")
        return arrays, (batch if batch is not None else 0)

    def _as_array(self, data, name):
        if isinstance(data, self.backend.xp.ndarray):
            return data
        if hasattr(data, "__array__") or isinstance(data, (list, tuple, int, float)):
            return self.backend.asarray(np.asarray(data))
        raise ShapeError(f"input {name!r}: expected an array, got {type(data).__name__}")

    # ---- state ------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Current parameters and buffers by the model's state_dict names (live arrays)."""
        roles = self.graph.state_roles
        return {k: v for k, v in self._state.items() if roles[k] in ("param", "buffer")}

    def __repr__(self) -> str:
        return f"<Plan {self.kind} {self.graph.name}: {len(self.graph.nodes)} nodes on {self.device}>"


def _describe(a) -> str:
    from ..ir.types import DType

    try:
        dtype = DType.from_any(a.dtype).short
    except Exception:
        dtype = str(a.dtype)
    return f"{dtype}[{','.join(str(d) for d in a.shape)}]"

