"""``default_collate``: a list of samples becomes one batch, as ``torch.utils.data.default_collate``
makes it, with ``gc.Tensor`` where PyTorch has ``torch.Tensor``.

Each field of the samples is batched by the type of the first sample's field: numpy arrays
and Tensors stack into one Tensor (a new leading batch dim), Python ints become an int64
Tensor, floats float64, bools bool, numpy scalars keep their dtype; strings and bytes stay a
list (a tuple inside a tuple or list sample, as PyTorch has it); dicts give a dict of batches,
namedtuples the same namedtuple, tuples and lists a list of per-field batches (a list, as
PyTorch returns for tuples too); nesting recurses. Anything else, and fields that disagree
across the samples, are a GraphcError naming the field.
"""
from __future__ import annotations

import collections.abc

import numpy as np

from ..executor.backends import backend_of
from ..ir.errors import GraphcError, ShapeError
from ..ir.types import DType
from ..core.tensor import Tensor

BATCHABLE = "tensors, numpy arrays, numbers, strings, dicts or lists"


def default_collate(batch):
    """Batch a list of samples the way ``torch.utils.data.default_collate`` does.

    >>> import numpy as np
    >>> from graphc.data import default_collate
    >>> out = default_collate([{"x": np.zeros(2, np.float32), "y": 1, "name": "a"},
    ...                        {"x": np.ones(2, np.float32), "y": 2, "name": "b"}])
    >>> out["x"].shape, out["x"].dtype.name, out["y"].tolist(), out["y"].dtype.name, out["name"]
    ((2, 2), 'float32', [1, 2], 'int64', ['a', 'b'])
    >>> [b.tolist() for b in default_collate([(1.5, True), (2.5, False)])]
    [[1.5, 2.5], [True, False]]
    """
    samples = list(batch)
    if not samples:
        raise GraphcError("default_collate: the batch is empty (no samples to stack)")
    return _collate(samples, "sample")


def _collate(samples, where: str):
    """One field's batch: ``samples`` is a list or tuple of that field's values, one per sample."""
    first = samples[0]
    if isinstance(first, Tensor):
        return _stack_tensors(samples, where)
    if isinstance(first, np.ndarray):
        return _stack_arrays(samples, where)
    if isinstance(first, (np.bool_, np.number, int, float)):
        return _as_batch(_numbers(samples, where), where)
    if isinstance(first, (str, bytes)):  # as PyTorch: a tuple inside a list or tuple sample, else a list
        return samples
    if isinstance(first, collections.abc.Mapping):
        return _collate_mapping(samples, where)
    if isinstance(first, collections.abc.Sequence):
        return _collate_sequence(samples, where)
    raise GraphcError(f"default_collate: {where} is a {_type_name(first)}; a batch must contain {BATCHABLE}")


def _collate_mapping(samples: list, where: str):
    keys = list(samples[0])
    for index, sample in enumerate(samples):
        if not isinstance(sample, collections.abc.Mapping) or set(sample) != set(keys):
            got = f"keys {list(sample)}" if isinstance(sample, collections.abc.Mapping) else f"a {_type_name(sample)}"
            raise GraphcError(f"default_collate: {where} has {got} in sample {index} but keys {keys} in sample 0; "
                              "every sample needs the same keys")
    batched = {key: _collate([s[key] for s in samples], f"{where}[{key!r}]") for key in keys}
    kind = type(samples[0])
    if kind is dict:
        return batched
    try:  # an OrderedDict or other mapping type stays that type when it can be built from a dict
        return kind(batched)
    except TypeError:
        return batched


def _collate_sequence(samples: list, where: str):
    size = len(samples[0])
    for index, sample in enumerate(samples):
        if not isinstance(sample, collections.abc.Sequence) or isinstance(sample, (str, bytes)) \
                or len(sample) != size:
            got = f"{len(sample)} fields" if isinstance(sample, collections.abc.Sized) else f"a {_type_name(sample)}"
            raise ShapeError(f"default_collate: {where} has {got} in sample {index} but {size} in sample 0; each "
                             "element in list of batch should be of equal size")
    fields = [_collate(column, f"{where}[{i}]") for i, column in enumerate(zip(*samples))]
    kind = type(samples[0])
    if isinstance(samples[0], tuple) and hasattr(kind, "_fields"):  # a namedtuple keeps its type and names
        return kind(*fields)
    return fields


def _stack_arrays(samples: list, where: str) -> Tensor:
    if samples[0].dtype.kind in "USO":
        raise GraphcError(f"default_collate: {where} is a numpy array of dtype {samples[0].dtype}; a batch "
                          f"must contain {BATCHABLE} (strings as Python str)")
    if not all(isinstance(s, np.ndarray) for s in samples):
        raise GraphcError(f"default_collate: {where} mixes numpy arrays and other types across the batch: "
                          f"{sorted({_type_name(s) for s in samples})}")
    _same_shapes(samples, where)
    return _as_batch(np.stack(samples), where)


def _stack_tensors(samples: list, where: str) -> Tensor:
    if not all(isinstance(s, Tensor) for s in samples):
        raise GraphcError(f"default_collate: {where} mixes Tensors and other types across the batch: "
                          f"{sorted({_type_name(s) for s in samples})}")
    _same_shapes(samples, where)
    if any(s.requires_grad for s in samples):  # recorded, so gradients reach the samples (as torch.stack)
        from ..ops.creation import stack

        return stack(samples)
    arrays = [s._concrete(f"default_collate of {where}") for s in samples]
    backends = {backend_of(a).name for a in arrays}
    if len(backends) > 1:
        raise GraphcError(f"default_collate: {where} holds Tensors on different devices {sorted(backends)}; "
                          "move them to one device first")
    return Tensor(backend_of(arrays[0]).xp.stack(arrays))


def _same_shapes(samples: list, where: str) -> None:
    shapes = [tuple(s.shape) for s in samples]
    for index, shape in enumerate(shapes):
        if shape != shapes[0]:
            raise ShapeError(f"default_collate: {where} has shape {shape} in sample {index} but {shapes[0]} in "
                             "sample 0; samples stack into one batch only when their shapes agree")


def _numbers(samples: list, where: str) -> np.ndarray:
    """One array of the samples' numbers, typed as PyTorch's default_collate types them: a
    Python float first gives float64; Python ints and bools give bool if all are bools, int64
    if all are integers, else float32 (``torch.tensor``'s inference); numpy scalars keep a
    shared dtype (numpy's promotion if they differ)."""
    if not all(isinstance(s, (int, float, np.bool_, np.number)) for s in samples):
        raise GraphcError(f"default_collate: {where} mixes numbers and other types across the batch: "
                          f"{sorted({_type_name(s) for s in samples})}")
    first = samples[0]
    if isinstance(first, np.generic):
        dtype = first.dtype if all(getattr(s, "dtype", None) == first.dtype for s in samples) else None
    elif isinstance(first, float):
        dtype = np.float64
    elif all(isinstance(s, (bool, np.bool_)) for s in samples):
        dtype = np.bool_
    elif all(isinstance(s, (int, np.integer, np.bool_)) for s in samples):
        dtype = np.int64
    else:
        dtype = np.float32
    try:
        return np.array(samples, dtype=dtype)
    except OverflowError:
        raise ShapeError(f"default_collate: {where} holds an integer outside int64's range") from None


def _as_batch(array: np.ndarray, where: str) -> Tensor:
    try:
        DType.from_any(array.dtype)
    except ShapeError:
        raise ShapeError(f"default_collate: {where} has dtype {array.dtype}, which graphc has no kernels for "
                         "(float32, float64, float16, int64, uint8, bool); convert it in the dataset, "
                         "e.g. .astype(np.int64)") from None
    return Tensor(array)


def _type_name(value) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def default_convert(data):
    """What a ``DataLoader(batch_size=None)`` applies to each sample (``torch``'s
    ``default_convert``): numpy arrays and numpy scalars become Tensors (sharing an array's
    memory), dicts and sequences are converted field by field (tuples as lists, as in PyTorch),
    anything else is returned unchanged.

    >>> import numpy as np
    >>> from graphc.data import default_convert
    >>> x, n, s = default_convert((np.zeros(2, np.float32), 3, "a"))
    >>> type(x).__name__, n, s
    ('Tensor', 3, 'a')
    """
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray) and data.dtype.kind not in "USO" or isinstance(data, (np.bool_, np.number)):
        return _as_batch(np.asarray(data), "the sample")
    if isinstance(data, collections.abc.Mapping):
        converted = {key: default_convert(value) for key, value in data.items()}
        try:
            return converted if type(data) is dict else type(data)(converted)
        except TypeError:
            return converted
    if isinstance(data, tuple) and hasattr(type(data), "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return [default_convert(d) for d in data]
    return data
