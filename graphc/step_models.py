"""The models a compiled step function uses, found by name (``gc.compile(train_step, ...)``):
their parameters and buffers become the plan's state, shared with the models."""
from __future__ import annotations

import contextlib
import functools
import inspect
import types

from .nn.module import Module


def discover_models(fn) -> dict:
    """``{variable name: Module}`` for the models ``fn`` can reach by name: the globals its code
    names, its closure variables and default arguments, ``self`` (or ``self``'s attributes) of
    a bound method, arguments bound by ``functools.partial``, the same in the Python functions
    it calls by name (helpers such as ``compute_loss``, a few levels deep), and Modules held
    one level inside those variables (``models["g"]``, ``trainer.model``: named ``models.g``).
    Submodules of another found module are left out (they are reached through it)."""
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
    if len(models) == 1:
        return next(iter(models.values()))
    if not models:
        return None
    root = Module()
    for name, module in models.items():
        root.add_module(name, module)
    return root
