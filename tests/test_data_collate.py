"""``graphc.data.default_collate`` batches samples as ``torch.utils.data.default_collate`` does
(compared with PyTorch live, or with its recorded outputs in tests/data/), with gc.Tensors,
and refuses what cannot be batched with a GraphcError naming the field."""
from __future__ import annotations

import collections

import numpy as np
import pytest

import graphc as gc
from data_structures import Point, as_outputs, assert_same_batches
from graphc.data import default_collate, default_convert

try:
    import torch
    from torch.utils.data import default_collate as torch_collate, default_convert as torch_convert
except ImportError:  # the comparisons replay tests/data/torch_test_data_collate.npz
    torch = None


def image(i, shape=(2, 3), dtype=np.float32):
    return (np.arange(np.prod(shape)).reshape(shape) + 10 * i).astype(dtype)


# each case: a list of samples, as a Dataset's __getitem__ would return them
CASES = {
    "dict": [{"image": image(i), "label": i, "weight": 0.5 * i, "flag": i % 2 == 0, "name": f"s{i}"}
             for i in range(3)],
    "tuple": [(image(i), i) for i in range(4)],
    "list": [[image(i, (3,)), float(i), "x"] for i in range(2)],
    "nested": [{"pair": (image(i, (2,)), {"deep": [i, i + 1]}), "meta": {"id": i, "tag": b"t"}} for i in range(3)],
    "namedtuple": [Point(image(i, (2,)), i) for i in range(3)],
    "numpy_scalars": [(np.float32(i) / 2, np.int64(i), np.bool_(i % 2), np.uint8(i)) for i in range(3)],
    "numpy_dtypes": [(image(i, (2,), np.float64), image(i, (2,), np.int64), image(i, (2,), np.uint8),
                      image(i, (2,), np.float16), image(i, (2,), np.bool_)) for i in range(2)],
    "zero_d_arrays": [np.array(i, np.float32) for i in range(3)],
    "ints_with_a_float": [1, 2.5, True],  # torch.tensor's inference: float32
    "bools_and_ints": [True, 2],
    "ordered_dict": [collections.OrderedDict([("b", i), ("a", image(i, (1,)))]) for i in range(2)],
}


def graphc_samples(samples):
    """The same samples with numpy arrays as gc.Tensors (a Dataset returning Tensors)."""
    if isinstance(samples, np.ndarray):
        return gc.from_numpy(samples)
    if isinstance(samples, dict):
        return type(samples)((k, graphc_samples(v)) for k, v in samples.items())
    if isinstance(samples, tuple) and hasattr(samples, "_fields"):
        return type(samples)(*map(graphc_samples, samples))
    if isinstance(samples, (list, tuple)):
        return type(samples)(map(graphc_samples, samples))
    return samples


def torch_samples(samples):
    """The same samples with numpy arrays as torch tensors."""
    if isinstance(samples, np.ndarray):
        return torch.from_numpy(samples)
    if isinstance(samples, dict):
        return type(samples)((k, torch_samples(v)) for k, v in samples.items())
    if isinstance(samples, tuple) and hasattr(samples, "_fields"):
        return type(samples)(*map(torch_samples, samples))
    if isinstance(samples, (list, tuple)):
        return type(samples)(map(torch_samples, samples))
    return samples


@pytest.mark.parametrize("case", sorted(CASES))
def test_default_collate_matches_pytorch(case, torch_ref):
    samples = CASES[case]
    want = torch_ref(samples, lambda: as_outputs([torch_collate(samples)]))
    batch = default_collate(samples)
    assert_same_batches([batch], want)


@pytest.mark.parametrize("case", ["dict", "tuple", "nested", "namedtuple", "numpy_dtypes"])
def test_samples_of_tensors_collate_like_pytorch_tensors(case, torch_ref):
    """A dataset returning tensors (gc.Tensor here, torch.Tensor there) gives the same batches."""
    samples = CASES[case]
    want = torch_ref(samples, lambda: as_outputs([torch_collate(torch_samples(samples))]))
    assert_same_batches([default_collate(graphc_samples(samples))], want)


@pytest.mark.parametrize("case", ["dict", "tuple", "nested", "namedtuple", "numpy_scalars"])
def test_default_convert_matches_pytorch(case, torch_ref):
    samples = CASES[case]
    want = torch_ref(samples, lambda: as_outputs([torch_convert(s) for s in samples]))
    assert_same_batches([default_convert(s) for s in samples], want)


def test_batches_are_graphc_tensors_that_act_like_torch_batches():
    batch = default_collate(CASES["dict"])
    x = batch["image"]
    assert isinstance(x, gc.Tensor) and isinstance(batch["label"], gc.Tensor)
    assert x.size(0) == 3 and x.view(3, -1).shape == (3, 6) and x.to("cpu").dtype == gc.float32
    assert batch["name"] == ["s0", "s1", "s2"]


def test_collating_tensors_that_require_grad_records_the_stack():
    """As torch.stack would: the gradient of the batch reaches the samples."""
    leaves = [gc.ones(2, requires_grad=True), gc.zeros(2, requires_grad=True)]
    (default_collate(leaves) * gc.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert [t.grad.tolist() for t in leaves] == [[1.0, 2.0], [3.0, 4.0]]


@pytest.mark.parametrize("samples, error, message", [
    ([[1, 2], [3]], gc.ShapeError, r"sample has 1 fields in sample 1 but 2 in sample 0; each element in list of "
                                   r"batch should be of equal size"),
    ([{"a": 1}, {"b": 1}], gc.GraphcError, r"sample has keys \['b'\] in sample 1 but keys \['a'\] in sample 0"),
    ([{"m": {"a": 1}}, {"m": 2}], gc.GraphcError, r"sample\['m'\] has a int in sample 1 but keys \['a'\]"),
    ([(1, (2, 3)), (1, (2,))], gc.ShapeError, r"sample\[1\] has 1 fields in sample 1 but 2 in sample 0"),
    ([(np.zeros(2), 1), (np.zeros(3), 1)], gc.ShapeError, r"sample\[0\] has shape \(3,\) in sample 1 but \(2,\)"),
    ([{"x": object()}], gc.GraphcError, r"sample\['x'\] is a object; a batch must contain tensors, numpy arrays"),
    ([None, None], gc.GraphcError, "sample is a NoneType"),
    ([np.array(["a", "b"])], gc.GraphcError, "numpy array of dtype <U1"),
    ([(np.zeros(2, "datetime64[s]"),)], gc.ShapeError,
         r"sample\[0\] has dtype datetime64\[s\], which graphc has no kernels for"),
    ([{"n": 1}, {"n": "one"}], gc.GraphcError, r"sample\['n'\] mixes numbers and other types across the batch"),
    ([np.zeros(2), [0.0, 0.0]], gc.GraphcError, "mixes numpy arrays and other types"),
    ([gc.zeros(2), np.zeros(2)], gc.GraphcError, "mixes Tensors and other types"),
    ([2**70], gc.ShapeError, "outside int64's range"),
    ([], gc.GraphcError, "the batch is empty"),
])
def test_what_cannot_be_batched_is_a_clear_error(samples, error, message):
    with pytest.raises(error, match=message):
        default_collate(samples)
