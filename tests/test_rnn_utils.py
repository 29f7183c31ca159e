"""``nn.utils.rnn.pad_sequence`` against a plain numpy reference (PyTorch's rule: longest first
dim, padded on ``padding_side``, stacked on dim 1, or dim 0 with ``batch_first``)."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.nn.utils.rnn import pad_sequence


def reference(seqs, batch_first, value, side):
    longest = max(len(s) for s in seqs)
    out = np.full((len(seqs), longest) + seqs[0].shape[1:], value, seqs[0].dtype)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s if side == "right" else out[i, :len(s)]
        if side == "left":
            out[i, longest - len(s):] = s
    return out if batch_first else np.swapaxes(out, 0, 1)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_matches_the_rule(batch_first, side):
    rng = np.random.default_rng(0)
    seqs = [rng.standard_normal((n, 3)).astype(np.float32) for n in (2, 5, 3)]
    got = pad_sequence([gc.tensor(s) for s in seqs], batch_first=batch_first, padding_value=-1.0, padding_side=side)
    np.testing.assert_array_equal(got.numpy(), reference(seqs, batch_first, -1.0, side))


def test_pad_sequence_inside_a_compiled_function_and_its_errors():
    plan = gc.compile(lambda a, b: gc.nn.utils.rnn.pad_sequence([a[0], b[0]], padding_value=7.0),
                      (np.ones((2, 4, 3), np.float32), np.ones((2, 2, 3), np.float32)))
    out = plan(np.ones((3, 4, 3), np.float32), np.ones((3, 2, 3), np.float32))
    assert out.shape == (4, 2, 3) and out[3, 1].tolist() == [7.0] * 3 and out[1, 1].tolist() == [1.0] * 3
    with pytest.raises(gc.GraphcError, match="empty list"):
        pad_sequence([])
    with pytest.raises(gc.GraphcError, match="padding_side"):
        pad_sequence([gc.ones(2)], padding_side="middle")
