"""``gc.device``: PyTorch's device object (``torch.device("cuda:0")``), over graphc's backends.

graphc names devices with strings (``"cpu"``, ``"cuda"``, ``"cuda:N"``) everywhere; a
``device`` is the same name with PyTorch's ``.type`` and ``.index``. It compares equal to its
string, so code written for either spelling works, and every function that takes a device
string takes a ``device`` too (they read ``str(device)``).
"""
from __future__ import annotations

from ..ir.errors import DeviceError

KINDS = ("cpu", "cuda")


class device:  # noqa: N801 - PyTorch's name
    """``gc.device("cuda:1")``, ``gc.device("cuda", 1)`` or ``gc.device("cpu")``.

    >>> import graphc as gc
    >>> d = gc.device("cuda:1")
    >>> d.type, d.index, str(d), d == "cuda:1"
    ('cuda', 1, 'cuda:1', True)
    >>> gc.device("cpu"), gc.zeros(2).device == gc.device("cpu")
    (device(type='cpu'), True)
    """

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):  # noqa: A002 - PyTorch's argument name
        if isinstance(type, device):
            type, index = (type.type, type.index) if index is None else (type.type, index)
        if not isinstance(type, str):
            raise DeviceError(f"gc.device expects a string such as 'cpu' or 'cuda:0', got {type!r}")
        kind, _, text = type.strip().lower().partition(":")
        if kind not in KINDS or (text and not text.isdigit()):
            raise DeviceError(f"unknown device {type!r}: use 'cpu', 'cuda' or 'cuda:N'")
        if text and index is not None:
            raise DeviceError(f"device {type!r} already has an index; do not pass index={index!r} as well")
        index = int(text) if text else index
        if index is not None and (not isinstance(index, int) or isinstance(index, bool) or index < 0):
            raise DeviceError(f"device index must be a non-negative int, got {index!r}")
        if kind == "cpu" and index not in (None, 0):
            raise DeviceError(f"cpu has no device {index}")
        self.type, self.index = kind, index

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        extra = "" if self.index is None else f", index={self.index}"
        return f"device(type={self.type!r}{extra})"

    def __eq__(self, other) -> bool:
        if isinstance(other, (device, str)):
            return str(self) == str(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))

    def __reduce__(self):  # copy/deepcopy rebuild it from its parts (never pickled by graphc)
        return (device, (self.type, self.index))


def is_device(target) -> bool:
    """Whether ``target`` names a device (a ``device``, or a string such as ``"cuda:0"``).

    >>> is_device("cuda:0"), is_device(device("cpu")), is_device("float32")
    (True, True, False)
    """
    if isinstance(target, device):
        return True
    return isinstance(target, str) and target.strip().lower().partition(":")[0] in KINDS


def parse_to(args, kwargs) -> tuple:
    """``Tensor.to``'s arguments as ``(device or None, dtype or None, copy)`` (PyTorch's forms:
    a device, a dtype, both, or another tensor; ``non_blocking`` and ``memory_format`` are
    accepted and mean nothing here).

    >>> from graphc.ir.types import DType
    >>> parse_to(("cuda:0", DType.float64), {})
    ('cuda:0', <DType.float64: 'f64'>, False)
    """
    from ..ir.errors import GraphcError
    from ..ir.types import DType
    from .tensor import Tensor

    unknown = set(kwargs) - {"device", "dtype", "non_blocking", "copy", "memory_format"}
    if unknown:
        raise GraphcError(f"Tensor.to() got unexpected keyword arguments {sorted(unknown)}")
    target, dtype = kwargs.get("device"), kwargs.get("dtype")
    flags = [a for a in args if isinstance(a, bool)]  # to(dtype, non_blocking, copy), positionally
    if len(flags) > 2:
        raise GraphcError(f"Tensor.to() takes non_blocking and copy after the dtype, got {len(flags)} flags")
    copy = kwargs.get("copy", flags[1] if len(flags) == 2 else False)
    for arg in (a for a in args if not isinstance(a, bool)):
        if isinstance(arg, Tensor):  # another tensor: its device and dtype
            target, dtype = arg.device, arg.dtype
        elif is_device(arg):
            target = arg
        else:
            try:
                dtype = DType.from_any(arg)
            except GraphcError:
                raise GraphcError(f"Tensor.to() cannot use {arg!r} as a device or a dtype") from None
    if target is not None:
        target = str(device(target) if not isinstance(target, device) else target)
    return target, (DType.from_any(dtype) if dtype is not None else None), bool(copy)


class memory_format:
    """``torch.memory_format``: a layout request. graphc arrays are always C-ordered, so every
    format gives the same values (``channels_last`` is a stride order PyTorch's kernels use for
    speed); the names are accepted wherever PyTorch takes ``memory_format=``.

    >>> import graphc as gc
    >>> gc.ones(1, 2, 3, 3).contiguous(memory_format=gc.channels_last).shape
    (1, 2, 3, 3)
    """

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
