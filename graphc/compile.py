"""The front door: ``gc.jit.trace``, ``gc.compile``, ``gc.export`` and ``gc.load``, over the builders
(graphc/tracing.py traces, graphc/training.py builds training plans, graphc/onnx/ converts)."""
from __future__ import annotations

import functools
import os

from .executor import Plan
from .executor.backends import backend_of
from .executor.run_node import run_graph_node
from .passes.freeze import freeze
from .passes.manager import run_pipeline
from .passes.numeric_check import check_verify
from .ir.errors import GraphcError, PlanFormatError
from .random import next_seed
from .tracing import ZERO_BATCH, numeric_example, trace_model


def trace(model_or_fn, *example_inputs, name=None, dynamic_batch=True, dynamic_dims=None):
    """Trace a Module or function once into an ``ir.Graph`` (leading dim of inputs -> ``N``).

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> g = gc.jit.trace(nn.Linear(4, 2), np.zeros((8, 4), np.float32))
    >>> [str(v.type) for v in g.outputs]
    ['f32[N,2]']
    """
    return trace_model(model_or_fn, example_inputs, name, dynamic_batch, dynamic_dims=dynamic_dims)[0]


def compile(model, example_inputs, loss_fn=None, optimizer=None, passes="default", device="cpu", verify=False,
            memory_budget=None, check_finite=True, dynamic_dims=None):
    """Trace ``model`` once and build a plan that reruns it.

    With no loss and optimizer this is a forward plan in the model's current mode
    (``model.eval()`` for inference). The plan shares parameter and buffer storage with the
    model; the batch dim is symbolic, so other batch sizes run without retracing.
    ``passes`` is ``"default"``, ``"none"`` or a list of pass names; ``verify=True`` runs
    ``ir.verify`` after every pass; ``verify="numeric"`` also runs the example inputs through
    the graph (in float64 where it can) before and after every pass, raises a ``GraphcError``
    naming the pass and the first node whose values moved beyond the tolerance, and keeps the
    worst differences in ``plan.graph.meta["verification"]`` (docs/verification.md; saved
    with the plan, shown by ``graphc inspect``). ``memory_budget`` (bytes; default half the
    device's memory) bounds every value and each batch size's arena: a plan over it is
    refused with a ``GraphcError`` naming the node before anything is allocated. A training step whose loss
    or any gradient is NaN/inf raises ``gc.NonFiniteError`` and changes no state
    (``check_finite=False`` drops that check, one reduction per gradient per step).
    ``dynamic_dims`` names the input dims that may vary besides the batch, as symbols the
    graph, the memory plan and the plan file carry: ``{"xs": {1: "T"}}`` (an input by name
    or position, a dim, its symbol; ``"N"`` names the batch dim, e.g. a time-major
    ``{"xs": {0: "T", 1: "N"}}``), or ``{"xs": (1,)}`` for a symbol named ``xs_1``. A new
    size of a symbol plans its buffers once and reuses them; a fixed dim that differs is a
    ``ShapeError``.

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU()).eval()
    >>> infer = gc.compile(model, example_inputs=(np.zeros((64, 4), np.float32),))
    >>> infer(np.ones((5, 4), np.float32)).shape
    (5, 8)
    >>> checked = gc.compile(model, (np.ones((8, 4), np.float32),), verify="numeric")
    >>> last = checked.graph.meta["verification"][-1]
    >>> last["pass"], last["dtype"], last["max_rel"] <= last["rtol"]
    ('fuse_elementwise', 'float64', True)
    """
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    check_verify(verify)
    plan = _compile(model, example_inputs, loss_fn, optimizer, passes, device, verify, memory_budget, check_finite,
                    dynamic_dims)
    if plan.kind == "inference" and plan.graph.meta.get("guards"):  # a new value of a static number: trace again
        plan.respecialize = lambda inputs: compile(model, tuple(inputs), loss_fn, optimizer, passes, device, verify,
                                                   memory_budget, check_finite, dynamic_dims)
    return plan


def _compile(model, example_inputs, loss_fn, optimizer, passes, device, verify, memory_budget, check_finite,
             dynamic_dims):
    from .nn.module import Module

    if loss_fn is None and optimizer is None and not isinstance(model, Module):
        from .training import compile_function  # a user's step (or any) function

        return compile_function(model, example_inputs, passes, device, verify, memory_budget, check_finite,
                                dynamic_dims)
    if hasattr(model, "to"):
        model.to(device)  # the plan shares the model's storage, so it lives on the plan's device
    if loss_fn is not None or optimizer is not None:
        from .training import compile_training

        return compile_training(model, example_inputs, loss_fn, optimizer, passes, device, verify, memory_budget,
                                check_finite, dynamic_dims)
    graph, tracer = trace_model(model, example_inputs, dynamic_dims=dynamic_dims)
    graph = run_pipeline(graph, "inference", passes, run_graph_node, verify,
                         example=numeric_example(verify, example_inputs, tracer.state_arrays))
    return Plan(graph, tracer.state_arrays, device=device, seed=next_seed(), kind="inference",
                memory_budget=memory_budget)


def load(path, device="cpu", memory_budget=None, *, map_location=None, weights_only=True):
    """Load what ``gc.save``, ``plan.save`` or ``gc.export`` wrote, telling them apart by the
    file's first bytes: a plan file gives a ``Plan`` (it needs no model code), a safetensors
    file a dict of numpy arrays (for ``model.load_state_dict``), an ONNX model an inference
    ``Plan`` (needs the ``onnx`` extra; external data, such as the ``model.onnx.data`` that
    ``torch.onnx.export`` writes, is read only from files inside the model's own folder).
    Every other file (a pickle or ``torch.save`` file, a zip, random bytes) is a
    ``PlanFormatError`` saying what it looks like and what graphc reads: graphc never unpickles.

    ``device`` and ``memory_budget`` are the plan's, as in :func:`compile` (a hostile file's
    huge intermediates are refused before they are allocated). ``map_location`` and
    ``weights_only`` are accepted so that ``torch.load(path, map_location="cpu",
    weights_only=True)`` runs as written: state dicts always load as host arrays, and
    ``load_state_dict`` puts them where the model is.

    >>> import numpy as np, graphc as gc, tempfile, os
    >>> from graphc import nn
    >>> path = os.path.join(tempfile.mkdtemp(), "m.graphc")
    >>> _ = gc.export(nn.Linear(4, 2), (np.zeros((8, 4), np.float32),), path)
    >>> gc.load(path)(np.ones((3, 4), np.float32)).shape
    (3, 2)
    """
    from .serialization import load_safetensors, sniff

    kind = sniff(path)  # a PlanFormatError for every file gc.load does not read, or cannot read
    if kind == "safetensors":
        return load_safetensors(path)
    if kind != "plan":  # "onnx", or None: an unknown file named *.onnx, which the importer explains
        from .onnx.importer import import_onnx

        return import_onnx(path, device, memory_budget)
    return _load_plan(path, device, memory_budget)


def load_model(path) -> Plan:
    """A plan (or an imported ONNX model) from ``path``, for the tools that need a graph
    (``graphc inspect/run/convert/viz``): a safetensors state dict is refused with what to
    give instead."""
    plan = load(path)
    if not isinstance(plan, Plan):
        raise GraphcError(f"{os.fspath(path)} holds tensors (a state dict), not a model; give a plan file "
                          "(plan.save, gc.export) or an ONNX model")
    return plan


def _load_plan(path, device, memory_budget) -> Plan:
    from .executor.plan import load_plan
    from .optim.lr_scheduler import restore

    plan = load_plan(path, device, memory_budget)
    entries, plan.lr_schedulers = plan.lr_schedulers, []
    try:  # the saved schedulers continue where they stood, driving the loaded plan's param_groups
        for entry in entries:
            restore(entry, plan)  # appends itself to plan.lr_schedulers
    except GraphcError as e:
        raise PlanFormatError(f"{os.fspath(path)}: {e.message}") from None
    return plan


def export(model, example_inputs, path, verify=False, opset=None, dynamic_dims=None) -> Plan:
    """Save ``model``'s frozen eval-mode inference plan to ``path``: parameters become
    constants, BatchNorm is folded into the convolution (in float64), constants are folded.
    The model's train/eval mode is restored afterwards. A path ending in ``.onnx`` writes an
    ONNX model instead (default-domain ops only, opset ``opset``, default 17; needs the
    ``onnx`` extra); a frozen inference Plan may be given in place of the model. ``verify``
    is :func:`compile`'s (``"numeric"`` checks every export pass on ``example_inputs``).

    >>> import numpy as np, graphc as gc, tempfile, os
    >>> from graphc import nn
    >>> path = os.path.join(tempfile.mkdtemp(), "m.graphc")
    >>> gc.export(nn.Linear(4, 2), (np.zeros((8, 4), np.float32),), path).graph.state
    {}
    """
    onnx_path = os.fspath(path).lower().endswith(".onnx")
    check_verify(verify)
    if opset is not None and not onnx_path:
        raise GraphcError("export: opset applies to ONNX files (a path ending in .onnx)")
    if isinstance(model, Plan):
        if onnx_path:
            from .onnx.export import DEFAULT_OPSET, save_onnx

            save_onnx(model, path, opset or DEFAULT_OPSET)
            return model
        raise GraphcError("export: a Plan is already compiled; save it with plan.save(path)")
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    try:
        graph, tracer = trace_model(model, example_inputs, dynamic_dims=dynamic_dims)
    finally:
        if was_training:
            model.train()
    if graph.meta.get("fixed_batch", {}).get("where") == ZERO_BATCH:  # a file that only takes empty batches
        raise GraphcError("export: example inputs have a zero-size batch; trace with at least one example")
    weights = {name: backend_of(a).to_numpy(a) for name, a in tracer.state_arrays.items()}  # GPU models too
    graph = run_pipeline(graph, "export", "default", run_graph_node, verify,
                         extra={"freeze": functools.partial(freeze, arrays=weights)},
                         example=numeric_example(verify, example_inputs, weights))
    plan = Plan(graph, {}, kind="inference")
    if onnx_path:
        from .onnx.export import DEFAULT_OPSET, save_onnx

        save_onnx(plan, path, opset or DEFAULT_OPSET)
    else:
        plan.save(path)
    return plan
