"""Compiling a user's whole training step: ``gc.compile(train_step, example_inputs=(x, y))``.

The function runs once on symbolic tensors, as any traced function, with three additions:

- the models it uses are found first (graphc/step_models.py), and their parameters and
  buffers become plan state, shared with the models;
- ``loss.backward()`` makes each parameter's ``.grad`` a *gradient placeholder*: a graph
  input standing for d(loss)/d(param). The training pipeline fuses the forward graph first,
  then its ``autodiff`` step replaces every placeholder by the gradient the autodiff pass
  derives, placed right after the loss (passes/training.py);
- ``optimizer.step()`` appends the optimizer's update ops (passes/optimizers.py) reading the
  symbolic ``.grad`` values, whatever the function did to them (clipping, accumulation);
- a function that calls ``backward()`` but neither steps an optimizer nor updates a parameter
  (an L-BFGS closure) returns the parameters' final ``.grad`` values as extra plan outputs
  (``graph.meta["gradients"]``), which the plan puts on the parameters after each call:
  replacing their ``.grad`` when the function zeroed or cleared it, adding to it otherwise.

The parameters' eager ``.grad`` values are put back afterwards: tracing changes no gradient.
The trace calls these (``Tracer.backward``, ``Tracer.optimizer_step``): ``loss.backward()`` and
``optimizer.step()`` hand the action to the trace in hand, eager or traced.
"""
from __future__ import annotations

import warnings

from ..ir.errors import TraceError
from ..ir.graph import Value
from ..passes.optimizers import add_optimizer_updates
from ..passes.training import TRAINING

# graph.meta[TRAINING] while tracing a step: {"placeholders": [{"value", "param", "loss"}], "losses": [...]}


def _meta(tracer) -> dict:
    meta = tracer.graph.meta.setdefault(TRAINING, {"placeholders": [], "losses": [], "stepped": []})
    return meta


def traced_backward(tensor, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
    """``loss.backward()`` inside a function being compiled (see the module doc)."""
    from .grad_mode import is_grad_enabled
    from .tensor import Tensor

    tracer = tensor._tracer
    where = tracer.user_location()
    if create_graph or inputs is not None:
        raise TraceError("backward(create_graph=True) and backward(inputs=...) cannot be compiled", where)
    if not tensor.dtype.is_float:
        raise TraceError(f"backward() on a {tensor.dtype.name} tensor: only floating-point values have gradients",
                         where)
    loss = tensor._value
    if gradient is not None:
        loss = tracer.builder.emit1("mul", [loss, tracer.lift(gradient, [tensor.dtype])], meta=tracer.current_meta())
    elif tensor.numel() != 1:
        raise TraceError(f"grad can be implicitly created only for scalar outputs: backward() on a tensor of shape "
                         f"{tuple(tensor.dims)} needs a gradient argument of that shape", where)
    if loss.type.shape != ():
        loss = tracer.builder.emit1("sum", [loss], {"dims": None, "keepdim": False}, meta=tracer.current_meta())
    params = _differentiable_params(tracer, loss)
    if not params or id(tensor._value) in tracer.no_grad_values or not is_grad_enabled():
        raise TraceError("element 0 of tensors does not require grad and does not have a grad_fn: the loss does not "
                         "depend on any parameter that requires grad (or was computed inside gc.no_grad())", where)
    meta = _meta(tracer)
    meta["losses"].append(loss.name)
    for name, param, read in params:
        value = tracer.graph.add_input(Value(tracer.graph.unique_name(f"grad.{name}"), tracer.graph.state[name].type))
        tracer.builder.reserve(value.name)
        meta["placeholders"].append({"value": value.name, "param": name, "loss": loss.name,
                                     **({"at": read.name} if read is not None else {})})
        grad = Tensor(_value=value, _tracer=tracer)
        param.grad = grad if param.grad is None else param.grad + grad  # accumulates, as eager backward()


def gradient_outputs(tracer) -> list:
    """``(state name, traced .grad, accumulates)`` for each parameter whose gradient a function
    that only differentiates (no ``optimizer.step()``, no parameter written) leaves in
    ``.grad``; ``accumulates``: the function never zeroed or cleared it, so, as eagerly, the
    plan's gradient adds to what the caller's ``.grad`` held."""
    from .tensor import Tensor

    meta = tracer.graph.meta.get(TRAINING)
    if not meta or meta["stepped"] or tracer.updated_params:
        return []
    found = []
    for name, param in tracer.state_tensors.items():
        grad = param.grad
        if isinstance(grad, Tensor) and grad._tracer is tracer:
            found.append((name, grad, id(param) not in tracer.grads_reset))
    return found


def _differentiable_params(tracer, loss) -> list:
    """``(state name, Parameter, value read)`` for each parameter requiring grad that the loss
    reaches through ops that pass gradients (``stop_gradient`` cuts the path). ``value read``
    is None for the parameter as the step began, or the value the loss reads it at after an
    update in the same step (a GAN's generator loss through the discriminator it just
    stepped): as eagerly, the gradient is the loss's w.r.t. the parameter as it is now, and
    nothing flows back into the update."""
    needed, read_after_update = {id(loss)}, {}
    for node in reversed(tracer.graph.nodes):
        if not any(id(v) in needed for v in node.outputs):
            continue
        if node.op != "stop_gradient":
            needed.update(id(v) for v in node.inputs)
        elif id(node.inputs[0]) in tracer.updated_params:  # a parameter read after its update
            name, where = tracer.updated_params[id(node.inputs[0])]
            if read_after_update.setdefault(name, node.outputs[0]) is not node.outputs[0]:
                raise TraceError(f"the loss reads parameter {name} at two of its values (updated at {where}); "
                                 "backward() differentiates each parameter at one value", tracer.user_location())
    out = []
    for name, value in tracer.graph.state.items():
        tensor = tracer.state_tensors.get(name)
        if not (tracer.graph.state_roles[name] == "param" and value.type.dtype.is_float
                and getattr(tensor, "requires_grad", False)):
            continue
        wanted = id(value) in needed or name in tracer.also_differentiate  # (used by the other side of a branch)
        if name in read_after_update:
            if id(value) in needed:
                raise TraceError(f"the loss reads parameter {name} both before and after its update in this compiled "
                                 "step (PyTorch would refuse to differentiate the overwritten value); compute the "
                                 "loss from one of them", tracer.user_location())
            out.append((name, tensor, read_after_update[name]))
        elif wanted:
            out.append((name, tensor, None))
    return out


def traced_step(optimizer, tracer) -> None:
    """``optimizer.step()`` inside a function being compiled: append its update ops."""
    where = tracer.user_location()
    meta = _meta(tracer)
    names = {id(t): name for name, t in tracer.state_tensors.items()}
    _check_one_update_per_parameter(tracer, optimizer, names, where)
    groups = optimizer.spec(names)
    grads, unused = {}, []
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is None:
                unused.append(names[id(p)])
            elif p.grad._tracer is tracer:
                grads[names[id(p)]] = p.grad._value
            else:
                raise TraceError(f"the .grad of {names[id(p)]} was set outside this compiled function", where)
    if not grads:
        raise TraceError(f"{type(optimizer).__name__}.step(): no parameter has a gradient: call loss.backward() "
                         "before optimizer.step()", where)
    if unused:
        shown = ", ".join(unused[:5]) + (f" and {len(unused) - 5} more" if len(unused) > 5 else "")
        warnings.warn(f"{type(optimizer).__name__}.step() in a compiled function: {len(unused)} parameter(s) got no "
                      f"gradient and are not updated ({shown}); the traced function never used them",
                      stacklevel=4)  # the user's optimizer.step() line, above Optimizer.step and the trace
    for group in groups:
        group["source"] = group.get("source") or where
    before = tracer.graph.value_names()
    add_optimizer_updates(tracer.graph, grads, groups, current=tracer.current_state)
    for name in tracer.graph.value_names() - before:
        tracer.builder.reserve(name)
    for name in grads:  # later reads and in-place writes (weight clipping after step()) see the update
        tracer.write_state(name, tracer.graph.updates[name])
    meta["stepped"].append(True)
    tracer.optimizers.append(optimizer)


def _check_one_update_per_parameter(tracer, optimizer, names: dict, where) -> None:
    """Several optimizers may step in one compiled function (an encoder's and a decoder's), each
    once and over parameters no other one updates: a plan updates each parameter once per call."""
    if any(o is optimizer for o in tracer.optimizers):
        raise TraceError(f"{type(optimizer).__name__}.step() was already called in this compiled function: a plan "
                         "runs one update of each parameter per call (compile one step and call the plan once per "
                         "step)", where)
    stepped = {id(p) for o in tracer.optimizers for p in o.params()}
    shared = [names.get(id(p), "?") for p in optimizer.params() if id(p) in stepped]
    if shared:
        raise TraceError(f"{type(optimizer).__name__}.step(): {', '.join(shared[:3])} already updated by another "
                         "optimizer's step() in this compiled function; a plan updates each parameter once per call",
                         where)
