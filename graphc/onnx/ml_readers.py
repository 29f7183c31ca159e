"""Readers of the ai.onnx.ml ops graphc runs (see ``readers`` for the contract): Binarizer
(1 where the input exceeds the threshold, else 0, in the input's type) and ArrayFeatureExtractor
(the elements at the given indices of the last axis, as onnx's reference takes them). The tree
ensembles, the encoders and the string ops of that domain are not read.
"""
from __future__ import annotations

import numpy as np

from .elementwise_readers import scalar
from .shape_readers import _known, _shape


def _binarizer(r, args):
    x, threshold = args[0], float(r.attrs().get("threshold", 0.0))
    if _known(x):
        return [(np.asarray(x) > threshold).astype(np.asarray(x).dtype)]
    return [r.emit("cast", [r.emit("gt", [x, scalar(r, x, threshold)])], {"dtype": r.value(x).type.dtype.name})]


def _array_feature_extractor(r, args):
    x, indices = args
    index = np.asarray(r.static(indices, "ArrayFeatureExtractor's indices")).reshape(-1).astype(np.int64)
    width = _shape(x)[-1]
    if not isinstance(width, int) or index.size == 0 or index.min() < -width or index.max() >= width:
        raise r.error(f"ArrayFeatureExtractor indices {index.tolist()} for a last axis of {width}")
    if _known(x):
        return [np.take(x, index, axis=-1)]
    rank = len(_shape(x))
    pieces = []
    for i in index % width:  # one slice per index: a run-time gather of a known index list
        slices = [[None, None, 1]] * rank
        slices[-1] = [int(i), int(i) + 1, 1]
        pieces.append(r.emit("slice", [x], {"slices": slices, "drop": []}))
    out = pieces[0] if len(pieces) == 1 else r.emit("concat", pieces, {"dim": rank - 1})
    return [out]


ML_READERS = {"ai.onnx.ml:Binarizer": _binarizer, "ai.onnx.ml:ArrayFeatureExtractor": _array_feature_extractor}
