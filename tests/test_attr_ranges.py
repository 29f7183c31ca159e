"""Every attr kind in the op registry has its valid range, checked when a graph is built
(compile) and when a plan file is loaded: out-of-range values never run silently."""
from __future__ import annotations

import math

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.ir import REGISTRY
from graphc.ir.registry import REQUIRED
from plan_edit import rewrite_body

VALID = {"ints": (1, 1), "int": 1, "float": 0.5, "bool": False, "str": "x", "dtype": "float32", "dims": (1,),
         "slices": ((0, 1, 1),), "graph": gc.ir.Graph("body")}  # an in-range value per kind, for attrs with no default

BAD_BN = [("eps", math.nan), ("eps", math.inf), ("eps", -1.0), ("eps", 0.0), ("eps", 1e308),
          ("momentum", math.nan), ("momentum", -0.1), ("momentum", 1.5)]


def test_every_ranged_attr_refuses_values_outside_its_range():
    checked = 0
    for op in REGISTRY.values():
        for key, spec in op.attrs.items():
            if spec.minimum is None and spec.maximum is None and not (spec.kind == "float" and spec.finite):
                continue
            bad = []
            if spec.minimum is not None:
                bad.append(spec.minimum - 1 if spec.kind != "float" else spec.minimum - 0.5)
            if spec.maximum is not None:
                bad.append(spec.maximum * 2 + 1 if spec.kind != "float" else math.inf)
            if spec.kind == "float" and spec.finite:
                bad.append(math.nan)
            for value in bad:
                if spec.kind == "ints":
                    value = (1, int(value))
                elif spec.kind == "int":
                    value = int(value)
                attrs = {k: VALID[s.kind] if s.default is REQUIRED else s.default for k, s in op.attrs.items()}
                attrs[key] = value
                with pytest.raises(gc.GraphcError, match=rf"attr {key}=.* must be"):
                    op.normalize_attrs(attrs)
                checked += 1
    assert checked >= 30  # conv/pool windows, groups, BN eps/momentum, dropout p, one_hot, ...


@pytest.mark.parametrize("attr, value", BAD_BN, ids=[f"{a}={v}" for a, v in BAD_BN])
def test_batch_norm_attrs_are_checked_at_compile(attr, value):
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2, **{attr: value}), nn.Flatten(), nn.Linear(2, 2))
    x, y = np.zeros((2, 1, 3, 3), np.float32), np.zeros(2, np.int64)
    with pytest.raises(gc.GraphcError, match=rf"attr {attr}=.* must be .*\[1 \(BatchNorm2d\) at test_attr_ranges"):
        gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=optim.SGD(model.parameters(), lr=0.1))


def _saved_training_plan(tmp_path):
    gc.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(2, 2))
    x, y = np.zeros((2, 1, 3, 3), np.float32), np.zeros(2, np.int64)
    step = gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=optim.SGD(model.parameters(), lr=0.1),
                      passes="none")
    path = tmp_path / "t.graphc"
    step.save(path)
    return path


def _edit_attrs(path, op_name, key, value):
    """Rewrite one attr of every ``op_name`` node in a saved plan (with a valid checksum)."""
    def edit(body):
        nodes = [node for node in body["graph"]["nodes"] if node[0] == op_name]
        assert nodes, f"no {op_name} node in the plan"
        for node in nodes:
            node[3][key] = value

    rewrite_body(path, edit)


@pytest.mark.parametrize("op_name, key, value", [
    *[("batch_norm_train", a, v) for a, v in BAD_BN],
    ("conv2d", "stride", [0, 1]), ("conv2d", "padding", [-1, 0]), ("conv2d", "dilation", [1, 0]),
    ("conv2d", "groups", 0),
], ids=lambda v: str(v))
def test_out_of_range_attrs_in_a_plan_file_are_refused_at_load(tmp_path, op_name, key, value):
    path = _saved_training_plan(tmp_path)
    _edit_attrs(path, op_name, key, value)
    with pytest.raises(gc.PlanFormatError, match=rf"attr {key}=.* must be"):
        gc.load(path)


def test_fill_values_may_be_infinite():
    mask = gc.full((2, 2), -math.inf)  # attention masks use -inf
    assert np.isneginf(mask.numpy()).all()
