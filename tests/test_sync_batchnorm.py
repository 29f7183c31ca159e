"""SyncBatchNorm in one process (no process group: its allreduce is the identity) trains as
BatchNorm. Across processes: tests/test_distributed.py.

Tolerance: 1e-5 relative after 3 Adam steps: SyncBatchNorm's one-pass variance (E[x^2] -
mean^2) and BatchNorm's two-pass one differ by float32 rounding, about 1e-7 per step."""
from __future__ import annotations

import numpy as np

import graphc as gc
from graphc import nn, optim


def train(sync: bool):
    gc.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 6 * 6, 3))
    if sync:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((8, 1, 8, 8)).astype(np.float32), rng.integers(0, 3, 8)
    step = gc.compile(model, (x, y), nn.CrossEntropyLoss(), optim.Adam(model.parameters(), lr=1e-2))
    for _ in range(3):
        step(x, y)
    return model, step


def test_sync_batchnorm_alone_trains_as_batchnorm():
    sync, step = train(sync=True)
    plain, _ = train(sync=False)
    assert type(sync[1]).__name__ == "SyncBatchNorm" and any(n.op == "allreduce" for n in step.graph.nodes)
    want = plain.state_dict()
    for name, value in sync.state_dict().items():
        np.testing.assert_allclose(np.asarray(value), np.asarray(want[name]), rtol=1e-5, atol=1e-5, err_msg=name)


def test_convert_keeps_the_same_tensors_and_eval_uses_running_statistics():
    bn = nn.BatchNorm2d(3)
    model = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(bn))
    assert model[0].weight is bn.weight and model[0].running_var is bn.running_var
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 4)).astype(np.float32)
    np.testing.assert_array_equal(model.eval()(gc.tensor(x)).numpy(), bn.eval()(gc.tensor(x)).numpy())
