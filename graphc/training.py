"""Compiling a training step: forward + loss, backward (autodiff pass) and optimizer update
(optimizer pass), all in ONE graph run by one plan."""
from __future__ import annotations

import functools

from .executor import Plan
from .ir.errors import GraphcError
from .nn.module import Module
from .nn.parallel import data_parallel_spec
from .optim.optimizer import Optimizer
from .executor.run_node import run_graph_node
from .passes.manager import run_pipeline
from .passes.training import TRAINING
from .random import next_seed
from .step_models import discover_models, step_root
from .core.tracer import input_names
from .tracing import numeric_example, trace_model


def trace_training_step(model: Module, example_inputs, loss_fn, dynamic_dims=None):
    """Trace ``loss_fn(model(*inputs), target)`` with the model's state as graph state.

    The graph returns ``(loss, model outputs...)``; the last example input is the target.
    """

    if len(example_inputs) < 2:
        raise GraphcError("a training plan needs example_inputs=(inputs..., target)")
    names = input_names(model, len(example_inputs) - 1) + ["target"]

    def train_step(*args):
        out = model(*args[:-1])
        outputs = list(out) if isinstance(out, (tuple, list)) else [out]
        return (loss_fn(outputs[0] if len(outputs) == 1 else out, args[-1]), *outputs)

    graph, tracer = trace_model(train_step, example_inputs, name=type(model).__name__, root=model, names=names,
                                dynamic_dims=dynamic_dims)
    if graph.outputs[0].type.shape != ():
        raise GraphcError(f"loss_fn must return a scalar, got {graph.outputs[0].type} (use reduction='mean' or 'sum')")
    graph.output_names = ["loss"] + (["output"] if len(graph.outputs) == 2 else
                                     [f"output{i}" for i in range(len(graph.outputs) - 1)])
    return graph, tracer


def build_training_graph(model: Module, example_inputs, loss_fn, optimizer: Optimizer, passes="default",
                         verify=False, check_finite=True, dynamic_dims=None):
    """Trace the step, then run the training pipeline (passes/manager.py): forward fusions,
    autodiff, the non-finite guard, the optimizer update, cleanup."""
    graph, tracer = trace_training_step(model, example_inputs, loss_fn, dynamic_dims)
    tensors = model.state_dict_tensors()
    groups = optimizer.spec({id(t): name for name, t in tensors.items()})
    # like PyTorch, parameters with requires_grad=False get no gradient and are not updated
    wrt = [name for group in groups for name in group["params"] if getattr(tensors[name], "requires_grad", True)]
    graph.meta[TRAINING] = {"wrt": wrt, "groups": groups}
    parallel = data_parallel_spec(model)
    if parallel:
        graph.meta[TRAINING]["data_parallel"] = parallel
    skip = () if check_finite else ("guard_finite",)
    example = numeric_example(verify, example_inputs, tracer.state_arrays, [g["lr"] for g in optimizer.param_groups])
    return run_pipeline(graph, "training", passes, run_graph_node, verify, skip, example=example), tracer


def compile_training(model, example_inputs, loss_fn, optimizer, passes="default", device="cpu", verify=False,
                     memory_budget=None, check_finite=True, dynamic_dims=None):
    if loss_fn is None or optimizer is None:
        raise GraphcError("a training plan needs both loss_fn and optimizer")
    if not isinstance(model, Module):
        raise GraphcError(f"a training plan needs an nn.Module, got {type(model).__name__}")
    if not isinstance(optimizer, Optimizer):
        raise GraphcError(f"optimizer must be a graphc.optim optimizer, got {type(optimizer).__name__}")
    graph, tracer = build_training_graph(model, example_inputs, loss_fn, optimizer, passes, verify, check_finite,
                                         dynamic_dims)
    plan = Plan(graph, tracer.state_arrays, device=device, seed=next_seed(), kind="training",
                param_groups=optimizer.param_groups, memory_budget=memory_budget)
    _attach(optimizer, plan, tracer)
    return plan


def _attach(optimizer, plan, tracer) -> None:
    """The plan holds ``optimizer``'s state, its parameters named as the traced state."""
    names = {id(t): name for name, t in tracer.state_tensors.items()}
    optimizer.attach_plan(plan, [names[id(p)] for p in optimizer.params()])


def compile_function(fn, example_inputs, passes="default", device="cpu", verify=False, memory_budget=None,
                     check_finite=True, dynamic_dims=None) -> Plan:
    """``gc.compile(train_step, example_inputs)`` for a plain function: trace it once with the
    state of the models it uses (graphc/step_models.py, graphc/core/step_trace.py). With ``backward()`` and
    ``optimizer.step()`` inside it is a training plan returning what the function returns;
    without, a forward plan that still reads the models' current parameters."""

    models = discover_models(fn)
    for model in models.values():
        model.to(device)  # the plan shares the models' storage
    root = step_root(models)
    params = list(root.parameters()) if root is not None else []
    saved = [(p, p.grad) for p in params]
    for p in params:
        p.grad = None  # a compiled step starts from no gradients, as after zero_grad()
    try:
        graph, tracer = trace_model(fn, example_inputs, name=getattr(fn, "__name__", type(fn).__name__), root=root,
                                    dynamic_dims=dynamic_dims)
    finally:
        for p, grad in saved:
            p.grad = grad  # tracing leaves the eager gradients as they were
    stepped = graph.meta.get(TRAINING, {}).get("placeholders")
    if not stepped:
        graph.meta.pop(TRAINING, None)
    elif data_parallel_spec(root):
        graph.meta[TRAINING]["data_parallel"] = data_parallel_spec(root)
    skip = () if check_finite else ("guard_finite",)
    optimizers = tracer.optimizers
    groups = [g for optimizer in optimizers for g in optimizer.param_groups]  # the order of graph.meta's lr inputs
    example = numeric_example(verify, example_inputs, tracer.state_arrays, [g["lr"] for g in groups])
    graph = run_pipeline(graph, "step" if stepped else "inference", passes, run_graph_node, verify, skip,
                         example=example)
    # a step that updates parameters (an optimizer, or by hand: p.data.add_(...)) is a training plan
    trains = bool(optimizers) or any(graph.state_roles[name] == "param" for name in graph.updates)
    if trains:
        graph.meta["returns"] = "all"
    plan = Plan(graph, tracer.state_arrays, device=device, seed=next_seed(),
                kind="training" if trains else "inference",
                param_groups=groups if optimizers else None, memory_budget=memory_budget)
    for optimizer in optimizers:
        _attach(optimizer, plan, tracer)
    if len(optimizers) > 1:
        plan.lr_schedulers = []  # each optimizer's schedulers edit its own groups, which the plan reads live
        plan.before_save = functools.partial(_refuse_saving_schedulers, optimizers)
    if graph.meta.get("gradients"):
        plan.on_gradients = _gradient_writer(graph.meta["gradients"], tracer.state_tensors, plan.backend)
    return plan


def _gradient_writer(entries: list, params: dict, backend):
    """What a plan of a function that only differentiates (an L-BFGS closure) does with each
    call's gradients: put them on the parameters' ``.grad``, as the function's ``backward()``
    does eagerly (adding to the caller's ``.grad`` unless the function zeroed or cleared it)."""
    from .core.tensor import Tensor

    def write(gradients: dict) -> None:
        for entry in entries:
            param, grad = params[entry["param"]], gradients[entry["param"]]
            if entry["accumulates"] and param.grad is not None:
                grad = backend.asarray(param.grad.array) + grad
            param.grad = Tensor(grad)
    return write


def _refuse_saving_schedulers(optimizers) -> None:
    """A plan file keeps learning-rate schedulers over the plan's groups as one list; those of
    several optimizers stepped in one function (each over its own groups) it cannot place."""
    if any(optimizer.lr_schedulers for optimizer in optimizers):
        raise GraphcError("plan.save: this plan steps several optimizers and some have learning-rate schedulers, "
                          "which a plan file cannot hold yet; save the models' and optimizers' state_dict() "
                          "(and the schedulers') with gc.save instead")
