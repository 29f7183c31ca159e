"""``torch._unsafe_masked_index`` and ``torch._unsafe_masked_index_put_accumulate``: the masked
indexing pair PyTorch's decompositions of interpolation produce (indices may be out of range
where the mask is False, so they are clamped before the read or write).
"""
from __future__ import annotations

from ..core.dispatch import apply
from ..core.indexing import index_put
from ..ir.errors import ShapeError
from .surface import torchsymbol


def _clamped(input, indices):
    """The index tensors clamped into range (positions the mask drops may hold anything)."""
    out = []
    for dim, index in enumerate(indices):
        if index is None:
            out.append(slice(None))
            continue
        size = input.shape[dim]
        out.append(index.clamp(-size, size - 1))
    return tuple(out)


@torchsymbol(method=False, functional=False)
def _unsafe_masked_index(input, mask, indices, fill):
    """``where(mask, input[indices], fill)``, the indices being unchecked where the mask is False.

    >>> import graphc as gc
    >>> x = gc.tensor([1.0, 2.0])
    >>> gc._unsafe_masked_index(x, gc.tensor([True, False]), [gc.tensor([1, 7])], 0.0).numpy().tolist()
    [2.0, 0.0]
    """
    if mask.dtype.name != "bool":
        raise ShapeError(f"_unsafe_masked_index: mask must be bool, got {mask.dtype.name}")
    return apply("where", [mask, input[_clamped(input, indices)], fill])


@torchsymbol(method=False, functional=False)
def _unsafe_masked_index_put_accumulate(input, mask, indices, values):
    """``input`` with ``values`` added at ``input[indices]`` where ``mask`` is True.

    >>> import graphc as gc
    >>> x = gc.zeros(2)
    >>> gc._unsafe_masked_index_put_accumulate(x, gc.tensor([True, False]), [gc.tensor([1, 7])],
    ...                                                  gc.tensor([5.0, 9.0])).numpy().tolist()
    [0.0, 5.0]
    """
    kept = apply("where", [mask, values, 0.0])
    return index_put(input, _clamped(input, indices), kept, accumulate=True)
