"""Complex numbers at the surface: parts, conjugates, angle, polar form, and the two views
between a complex tensor and its (real, imag) pairs (ir/ops/fft.py holds the primitives).

On a real tensor PyTorch's ``real``, ``conj``, ``resolve_conj`` and ``resolve_neg`` return the
tensor itself (graphc has no lazy conjugate or negative bits to resolve), ``imag`` is an
error and ``angle`` is 0 or pi (NaN stays NaN), in the real dtype.

>>> import graphc as gc
>>> z = gc.complex(gc.tensor([3.0]), gc.tensor([4.0]))
>>> z.dtype, z.real.numpy().tolist(), z.imag.numpy().tolist(), gc.conj(z).numpy().tolist()
(<DType.complex64: 'c64'>, [3.0], [4.0], [(3-4j)])
"""
from __future__ import annotations

import math

from ..core.dispatch import apply
from ..ir.errors import ShapeError
from ..ir.types import DType
from .surface import torchsymbol


@torchsymbol(method=False, functional=False)
def real(input):
    """The real part (the tensor itself when it is real); ``Tensor.real`` is this property.

    >>> import graphc as gc
    >>> gc.real(gc.tensor([1.0, 2.0])).numpy().tolist()
    [1.0, 2.0]
    """
    return apply("real", [input]) if input.dtype.is_complex else input


@torchsymbol(method=False, functional=False)
def imag(input):
    """The imaginary part of a complex tensor (an error for a real one, as in PyTorch).

    >>> import graphc as gc
    >>> gc.imag(gc.tensor([1.0]).cfloat()).numpy().tolist()
    [0.0]
    """
    if not input.dtype.is_complex:
        raise ShapeError("imag is not implemented for tensors with non-complex dtypes.")
    return apply("imag", [input])


@torchsymbol(functional=False)
def conj(input):
    """The complex conjugate (the tensor itself when it is real).

    >>> import graphc as gc
    >>> gc.conj(gc.tensor([1.0]).cfloat()).dtype
    <DType.complex64: 'c64'>
    """
    return apply("conj", [input]) if input.dtype.is_complex else input


@torchsymbol(functional=False)
def conj_physical(input):
    """The complex conjugate, computed now (a copy of a real tensor).

    >>> import graphc as gc
    >>> gc.conj_physical(gc.tensor([1.0, -2.0])).numpy().tolist()
    [1.0, -2.0]
    """
    return apply("conj", [input])


@torchsymbol(functional=False)
def resolve_conj(input):
    """The tensor itself: graphc conjugates eagerly, so there is no conjugate bit to resolve.

    >>> import graphc as gc
    >>> gc.resolve_conj(gc.tensor([1.0])).numpy().tolist()
    [1.0]
    """
    return input


@torchsymbol(functional=False)
def resolve_neg(input):
    """The tensor itself: graphc negates eagerly, so there is no negative bit to resolve.

    >>> import graphc as gc
    >>> gc.resolve_neg(gc.tensor([-1.0])).numpy().tolist()
    [-1.0]
    """
    return input


@torchsymbol(functional=False)
def angle(input):
    """The argument of each element: ``atan2(imag, real)``; for a real tensor 0, or pi where
    negative (NaN stays NaN), as a float tensor.

    >>> import graphc as gc
    >>> gc.angle(gc.tensor([-2.0, 3.0])).numpy().tolist()
    [3.1415927410125732, 0.0]
    """
    from .functions import where
    from .functions_math import atan2, isnan

    if input.dtype.is_complex:
        return atan2(imag(input), real(input))
    x = input if input.dtype.is_float else input.float()
    return where(isnan(x), x, where(x < 0, math.pi, 0.0).to(x.dtype))


@torchsymbol(functional=False)
def sgn(input):
    """``z / |z|`` (0 where z = 0) for a complex tensor; ``sign`` for a real one.

    >>> import graphc as gc
    >>> gc.sgn(gc.tensor([3 + 4j, 0j])).numpy().tolist(), gc.sgn(gc.tensor([-2.0, 0.0])).numpy().tolist()
    ([(0.6000000238418579+0.800000011920929j), 0j], [-1.0, 0.0])
    """
    from .functions import abs as magnitude, sign, where

    if not input.dtype.is_complex:
        return sign(input)
    r = magnitude(input)
    zero = r == 0
    return where(zero, 0.0, input / where(zero, 1.0, r).to(input.dtype))


@torchsymbol(top=False, functional=False)
def cfloat(input, memory_format=None):
    """``Tensor.cfloat()``: a cast to complex64 (real inputs get a zero imaginary part).

    >>> import graphc as gc
    >>> gc.ones(2).cfloat().dtype
    <DType.complex64: 'c64'>
    """
    return input.cast(DType.complex64)


@torchsymbol(top=False, functional=False)
def cdouble(input, memory_format=None):
    """``Tensor.cdouble()``: a cast to complex128."""
    return input.cast(DType.complex128)


@torchsymbol(method=False, functional=False)
def polar(abs, angle):  # noqa: A002 - PyTorch's parameter names
    """The complex number of magnitude ``abs`` and argument ``angle``.

    >>> import graphc as gc
    >>> gc.polar(gc.tensor([2.0]), gc.tensor([0.0])).numpy().tolist()
    [(2+0j)]
    """
    from .functions import cos, sin

    return complex(abs * cos(angle), abs * sin(angle))


@torchsymbol(method=False, functional=False)
def complex(real, imag):  # noqa: A001 - torch.complex
    """``real + i * imag`` from two float tensors of one dtype (float32 -> complex64).

    >>> import graphc as gc
    >>> gc.complex(gc.tensor([1.0]), gc.tensor([2.0])).numpy().tolist()
    [(1+2j)]
    """
    return apply("make_complex", [real, imag])


@torchsymbol(method=False, functional=False)
def view_as_real(input):
    """A complex tensor as real pairs: a new last dim of size 2 (real, imag).

    >>> import graphc as gc
    >>> gc.view_as_real(gc.complex(gc.tensor([1.0]), gc.tensor([2.0]))).numpy().tolist()
    [[1.0, 2.0]]
    """
    from .creation import stack

    if not input.dtype.is_complex:
        raise ShapeError("view_as_real is only supported for complex tensors")
    return stack([apply("real", [input]), apply("imag", [input])], -1)


@torchsymbol(method=False, functional=False)
def view_as_complex(input):
    """Real pairs (a last dim of size 2) as a complex tensor.

    >>> import graphc as gc
    >>> gc.view_as_complex(gc.tensor([[1.0, 2.0]])).numpy().tolist()
    [(1+2j)]
    """
    if input.dtype not in (DType.float32, DType.float64):
        raise ShapeError(f"view_as_complex is only supported for float and double tensors, but got {input.dtype.name}")
    if input.ndim == 0 or input.dims[-1] != 2:
        raise ShapeError(f"Tensor must have a last dimension of size 2, got shape {tuple(input.dims)}")
    return complex(input[..., 0], input[..., 1])


@torchsymbol(functional=False)
def is_complex(input) -> bool:
    """Whether the dtype is complex.

    >>> import graphc as gc
    >>> gc.is_complex(gc.tensor([1.0])), gc.tensor([1.0]).cfloat().is_complex()
    (False, True)
    """
    return input.dtype.is_complex


@torchsymbol(functional=False)
def is_floating_point(input) -> bool:
    """Whether the dtype is a floating-point one (float16, float32, float64).

    >>> import graphc as gc
    >>> gc.is_floating_point(gc.tensor([1.0])), gc.tensor([1]).is_floating_point()
    (True, False)
    """
    return input.dtype.is_float


@torchsymbol(functional=False)
def isreal(input):
    """Whether each element is real: True everywhere for a real tensor, ``imag == 0`` for a
    complex one.

    >>> import graphc as gc
    >>> gc.isreal(gc.complex(gc.tensor([1.0, 1.0]), gc.tensor([0.0, 2.0]))).numpy().tolist()
    [True, False]
    """
    if input.dtype.is_complex:
        return apply("eq", [apply("imag", [input]), 0.0])
    return apply("eq", [input, input]).logical_or(apply("ne", [input, input]))


# Tensor.real and Tensor.imag are properties in PyTorch (graphc/__init__.py installs them)
PROPERTIES = {"real": real, "imag": imag}
