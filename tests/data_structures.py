"""Helpers for the data-loading tests: a collated batch (PyTorch's or graphc's) as one text
describing its structure and types plus its arrays by path, so torch's side can be stored in
tests/data/ and compared on machines without torch."""
from __future__ import annotations

import collections

import numpy as np

Point = collections.namedtuple("Point", "x y")  # a namedtuple sample field: collated into a Point of batches


def flatten(obj, path: str = "out", arrays: dict | None = None):
    """(structure text, {path: numpy array}) of a (nested) batch. Tensors of either library
    appear as ``tensor:<dtype>`` with their values under their path; containers keep their
    type's name, so a tuple batched as a list, or a dict as a dict, shows in the text."""
    arrays = {} if arrays is None else arrays
    if hasattr(obj, "numpy") and hasattr(obj, "dtype"):  # torch.Tensor or gc.Tensor
        dtype = getattr(obj.dtype, "name", None) or str(obj.dtype).replace("torch.", "")
        arrays[path] = np.asarray(obj.numpy())
        return f"tensor:{dtype}", arrays
    if isinstance(obj, dict):
        parts = [f"{k!r}:{flatten(v, f'{path}[{k!r}]', arrays)[0]}" for k, v in obj.items()]
        return f"{type(obj).__name__}{{{','.join(parts)}}}", arrays
    if isinstance(obj, (list, tuple)):
        parts = [flatten(v, f"{path}[{i}]", arrays)[0] for i, v in enumerate(obj)]
        return f"{type(obj).__name__}[{','.join(parts)}]", arrays
    return repr(obj), arrays  # strings and bytes stay Python values


def as_outputs(batches) -> dict:
    """torch_ref outputs for a list of batches: the structure text and every array."""
    text, arrays = flatten(list(batches))
    return {"structure": np.array(text), **arrays}


def assert_same_batches(got_batches, want: dict) -> None:
    text, arrays = flatten(list(got_batches))
    assert text == str(want["structure"])
    assert set(arrays) == set(want) - {"structure"}
    for path, value in arrays.items():
        expected = np.asarray(want[path])
        assert value.dtype == expected.dtype, (path, value.dtype, expected.dtype)
        np.testing.assert_array_equal(value, expected, err_msg=path)
