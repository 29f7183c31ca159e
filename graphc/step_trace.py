"""Compiling a user's whole training step: ``gc.compile(train_step, example_inputs=(x, y))``.

The function runs once on symbolic tensors, as any traced function, with three additions:

- the models it uses (global or closure variables, or ``self`` of a bound method) are found
  first, and their parameters and buffers become plan state, shared with the models;
- ``loss.backward()`` makes each parameter's ``.grad`` a *gradient placeholder*: a graph
  input standing for d(loss)/d(param). The training pipeline fuses the forward graph first,
  then its ``autodiff`` step replaces every placeholder by the gradient the autodiff pass
  derives, placed right after the loss (passes/training.py);
- ``optimizer.step()`` appends the optimizer's update ops (passes/optimizers.py) reading the
  symbolic ``.grad`` values, whatever the function did to them (clipping, accumulation).

The parameters' eager ``.grad`` values are put back afterwards: tracing changes no gradient.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import types
import warnings

from .ir.errors import TraceError
from .ir.graph import Value
from .passes.optimizers import add_optimizer_updates
from .passes.training import TRAINING

# graph.meta[TRAINING] while tracing a step: {"placeholders": [{"value", "param", "loss"}], "losses": [...]}


def discover_models(fn) -> dict:
    """``{variable name: Module}`` for the models ``fn`` can reach by name: the globals its code
    names, its closure variables and default arguments, ``self`` (or ``self``'s attributes) of
    a bound method, arguments bound by ``functools.partial``, the same in the Python functions
    it calls by name (helpers such as ``compute_loss``, a few levels deep), and Modules held
    one level inside those variables (``models["g"]``, ``trainer.model``: named ``models.g``).
    Submodules of another found module are left out (they are reached through it)."""
    from .nn.module import Module

    found: dict = {}
    _collect(fn, found, set(), depth=0)
    modules = {}
    for name, value in found.items():
        if isinstance(value, Module):
            modules.setdefault(name, value)
        else:
            modules.update((f"{name}.{key}", v) for key, v in _held_modules(value) if f"{name}.{key}" not in modules)
    unique = {}
    for name, module in sorted(modules.items()):
        if all(module is not m for m in unique.values()):  # one model reached by two names: the first
            unique[name] = module
    inner = {id(m) for v in unique.values() for m in v.modules() if m is not v}
    return {n: m for n, m in unique.items() if id(m) not in inner and m.state_dict_tensors()}


MAX_HELPER_DEPTH = 4  # functions calling functions: how far the search for models follows them
MAX_HELD = 64  # entries of a dict or list searched for models


def _collect(fn, found: dict, seen: set, depth: int) -> None:
    """Add ``fn``'s reachable variables to ``found`` (first name wins), following the plain
    Python functions among them."""
    from .nn.module import Module

    names = {}
    while isinstance(fn, functools.partial):  # models bound as arguments: named by the parameter
        names.update((k, v) for k, v in fn.keywords.items())
        names.update((f"arg{i}", v) for i, v in enumerate(fn.args))
        fn = fn.func
    bound = getattr(fn, "__self__", None)
    func = getattr(fn, "__func__", fn)
    code = getattr(func, "__code__", None)
    if code is None:  # a Module or other callable object: its own state is what it uses
        if isinstance(fn, Module):
            found.setdefault("self", fn)
        return
    if id(func) in seen:
        return
    seen.add(id(func))
    params = list(inspect.signature(func).parameters) if names or func.__defaults__ or func.__kwdefaults__ else []
    names = {params[int(k[3:])] if k.startswith("arg") and int(k[3:]) < len(params) else k: v for k, v in names.items()}
    defaults = func.__defaults__ or ()
    positional = [p for p in params if p not in (func.__kwdefaults__ or {})]
    names.update((p, v) for p, v in zip(positional[len(positional) - len(defaults):], defaults))
    names.update(func.__kwdefaults__ or {})
    if isinstance(bound, Module):
        names["self"] = bound
    elif bound is not None:
        names.update(vars(bound))
    for name, cell in zip(code.co_freevars, func.__closure__ or ()):
        with contextlib.suppress(ValueError):  # a closure variable not assigned yet has no contents
            names[name] = cell.cell_contents
    module_globals = getattr(func, "__globals__", {})
    for name in _names_used(code):
        if name in module_globals and name not in names:
            names[name] = module_globals[name]
    for name, value in names.items():
        found.setdefault(name, value)
    if depth < MAX_HELPER_DEPTH:
        for value in names.values():
            if isinstance(value, (types.FunctionType, types.MethodType, functools.partial)):
                _collect(value, found, seen, depth + 1)


def _names_used(code: types.CodeType) -> list:
    """Global names read by ``code`` and the functions and comprehensions nested in it."""
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += _names_used(const)
    return names


def _held_modules(value) -> list:
    """``(key, Module)`` held directly in a dict, list, tuple or plain object's attributes."""
    from .nn.module import Module

    if isinstance(value, (dict, list, tuple)) and len(value) > MAX_HELD:
        return []  # a data set, not a handful of models
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [(str(i), v) for i, v in enumerate(value)]
    elif hasattr(value, "__dict__") and not isinstance(value, (type, types.ModuleType, types.FunctionType)):
        items = list(vars(value).items())
    else:
        return []
    return [(k, v) for k, v in items if isinstance(v, Module)]


def step_root(models: dict):
    """The module whose state the plan holds: the one model, or a container naming each
    model by its variable (state names ``model.fc.weight``, ``critic.fc.weight``)."""
    from .nn.module import Module

    if len(models) == 1:
        return next(iter(models.values()))
    if not models:
        return None
    root = Module()
    for name, module in models.items():
        root.add_module(name, module)
    return root


def _meta(tracer) -> dict:
    meta = tracer.graph.meta.setdefault(TRAINING, {"placeholders": [], "losses": [], "stepped": []})
    return meta


def traced_backward(tensor, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
    """``loss.backward()`` inside a function being compiled (see the module doc)."""
    from .autograd import is_grad_enabled
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
    for name, param in params:
        value = tracer.graph.add_input(Value(tracer.graph.unique_name(f"grad.{name}"), tracer.graph.state[name].type))
        tracer.builder.reserve(value.name)
        meta["placeholders"].append({"value": value.name, "param": name, "loss": loss.name})
        grad = Tensor(_value=value, _tracer=tracer)
        param.grad = grad if param.grad is None else param.grad + grad  # accumulates, as eager backward()


def _differentiable_params(tracer, loss) -> list:
    """``(state name, Parameter)`` for each parameter requiring grad that the loss reaches
    through ops that pass gradients (``stop_gradient`` cuts the path)."""
    needed = {id(loss)}
    for node in reversed(tracer.graph.nodes):
        if not any(id(v) in needed for v in node.outputs):
            continue
        if node.op != "stop_gradient":
            needed.update(id(v) for v in node.inputs)
        elif id(node.inputs[0]) in tracer.updated_params:  # its gradient would silently be lost
            name, where = tracer.updated_params[id(node.inputs[0])]
            raise TraceError(f"the loss reads parameter {name} after it was updated ({where}) in the same "
                             "compiled step: the plan differentiates w.r.t. the parameters as the step began; compute "
                             "the loss before updating them", tracer.user_location())
    out = []
    for name, value in tracer.graph.state.items():
        tensor = tracer.state_tensors.get(name)
        if (id(value) in needed and tracer.graph.state_roles[name] == "param" and value.type.dtype.is_float
                and getattr(tensor, "requires_grad", False)):
            out.append((name, tensor))
    return out


def traced_step(optimizer, tracer) -> None:
    """``optimizer.step()`` inside a function being compiled: append its update ops."""
    where = tracer.user_location()
    meta = _meta(tracer)
    if meta["stepped"]:
        raise TraceError("optimizer.step() was already called in this compiled function: a plan runs one "
                         "optimizer update per call (compile one step and call the plan once per step)", where)
    names = {id(t): name for name, t in tracer.state_tensors.items()}
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
        raise TraceError(f"{type(optimizer).__name__}.step() with no gradients: call loss.backward() before "
                         "optimizer.step()", where)
    if unused:
        shown = ", ".join(unused[:5]) + (f" and {len(unused) - 5} more" if len(unused) > 5 else "")
        warnings.warn(f"{type(optimizer).__name__}.step() in a compiled function: {len(unused)} parameter(s) got no "
                      f"gradient and are not updated ({shown}); the traced function never used them",
                      stacklevel=3)
    for group in groups:
        group["source"] = group.get("source") or where
    before = tracer.graph.value_names()
    add_optimizer_updates(tracer.graph, grads, groups, current=tracer.current_state)
    for name in tracer.graph.value_names() - before:
        tracer.builder.reserve(name)
    for name in grads:  # later reads and in-place writes (weight clipping after step()) see the update
        tracer.write_state(name, tracer.graph.updates[name])
    meta["stepped"].append(True)
    tracer.optimizer = optimizer


def zero_grad_traced(param, tracer) -> None:
    """``zero_grad(set_to_none=False)`` while tracing: a symbolic gradient becomes zeros."""
    from .tensor import Tensor

    value = param.grad._value
    zeros = tracer.builder.emit1("full", [], {"shape": list(value.type.shape), "value": 0.0,
                                              "dtype": value.type.dtype.name}, meta=tracer.current_meta())
    param.grad = Tensor(_value=zeros, _tracer=tracer)
