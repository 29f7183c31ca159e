"""Grad mode (``no_grad``, ``enable_grad``, ``inference_mode``, ``set_grad_enabled``): per
thread, as PyTorch's. A leaf fact any room may import (it imports only graphc.ir's errors)."""
from __future__ import annotations

import functools
import threading

from ..ir.errors import GraphcError


_mode = threading.local()  # grad mode is per thread, as PyTorch's


def is_grad_enabled() -> bool:
    """Whether eager ops record for ``backward()`` (and traced ops carry gradients)."""
    return getattr(_mode, "enabled", True)


class _GradMode:
    """A ``with`` block and a decorator (``@gc.no_grad()`` or bare ``@gc.no_grad``, as PyTorch
    allows) that sets grad mode inside and restores it after."""

    enabled: bool | None = None  # the mode inside; None leaves it as it is

    def __new__(cls, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:  # bare @gc.no_grad: decorate at once
            return cls()(args[0])
        return super().__new__(cls)

    def __init__(self):
        self._outer = []  # a stack: one decorator instance may be entered recursively

    def __enter__(self):
        self._outer.append(is_grad_enabled())
        if self.enabled is not None:
            _mode.enabled = self.enabled
        return self

    def __exit__(self, *exc):
        _mode.enabled = self._outer.pop()
        return False

    def __call__(self, func):
        if not callable(func):
            raise GraphcError(f"{type(self).__name__}() decorates functions, got {type(func).__name__}")

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Nothing inside records gradients (eager) or passes them back (inside a compiled
    function): for evaluation and for updates done by hand.

    >>> import graphc as gc
    >>> w = gc.tensor([1.0], requires_grad=True)
    >>> with gc.no_grad():
    ...     (w * 2).requires_grad
    False
    >>> @gc.no_grad()
    ... def predict(x):
    ...     return x * 2
    >>> predict(w).requires_grad
    False
    """

    enabled = False


class enable_grad(_GradMode):
    """Record gradients again inside a ``no_grad`` block."""

    enabled = True


class inference_mode(_GradMode):
    """``torch.inference_mode(mode=True)``: ``no_grad`` when ``mode`` is true, else nothing."""

    enabled = False

    def __init__(self, mode=True):
        super().__init__()
        if not mode:
            self.enabled = None  # inference_mode(False) changes nothing


class set_grad_enabled(_GradMode):
    """Turn gradient recording on or off: as a call (it takes effect at once, as PyTorch's),
    a ``with`` block or a decorator.

    >>> import graphc as gc
    >>> with gc.set_grad_enabled(False):
    ...     y = gc.tensor([1.0], requires_grad=True) * 2
    >>> y.requires_grad
    False
    """

    def __init__(self, mode: bool = True):
        super().__init__()
        self.enabled, self._before = bool(mode), is_grad_enabled()
        _mode.enabled = self.enabled

    def __enter__(self):
        if self._before is None:
            return super().__enter__()
        self._outer.append(self._before)  # the mode before the call, not the one it set
        return self

    def __call__(self, func):
        _mode.enabled = self._before  # as a decorator it changes only the calls, as PyTorch's
        self._before = None  # entered from the wrapper: restore what each call found
        return super().__call__(func)
