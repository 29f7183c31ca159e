"""A plan shared by threads gives every call exact results: inference calls run side by side
on their own programs (arena and kernel scratch), training steps run one at a time."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim

CALLS = 200  # per thread; each call checks its own output, so races show up as mismatches
THREADS = 4


def run_threads(worker, count=THREADS):
    errors, threads = [], []

    def guarded(i):
        try:
            worker(i)
        except BaseException as e:  # noqa: BLE001 - reported to the main thread below
            errors.append(e)

    for i in range(count):
        threads.append(threading.Thread(target=guarded, args=(i,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 10))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 4 * 4, 5))


@pytest.mark.parametrize("make, shape", [(mlp, (8, 32)), (cnn, (8, 1, 8, 8))], ids=["mlp", "cnn"])
def test_inference_plan_from_threads_is_exact(make, shape):
    gc.manual_seed(0)
    plan = gc.compile(make().eval(), example_inputs=(np.zeros(shape, np.float32),))
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype(np.float32) for _ in range(THREADS)]
    expected = [plan(x).copy() for x in inputs]

    def worker(i):
        for _ in range(CALLS):
            got = plan(inputs[i])
            if not np.array_equal(got, expected[i]):
                raise AssertionError(f"thread {i} got a wrong result")

    run_threads(worker)
    assert len(plan._programs) == 1  # one cached program; the spares serve concurrent calls
    assert len(plan._spares.get(shape[0], [])) <= plan.max_spares


def test_inference_threads_with_different_batch_sizes():
    gc.manual_seed(0)
    plan = gc.compile(mlp().eval(), example_inputs=(np.zeros((8, 32), np.float32),))
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((b, 32)).astype(np.float32) for b in (1, 3, 8, 8)]
    expected = [plan(x).copy() for x in inputs]

    def worker(i):
        for _ in range(CALLS // 2):
            assert np.array_equal(plan(inputs[i]), expected[i])

    run_threads(worker)


def test_training_steps_from_threads_are_serialized():
    def setup():
        gc.manual_seed(0)
        model = cnn()
        opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        return model, gc.compile(model, (X, Y), loss_fn=nn.CrossEntropyLoss(), optimizer=opt)

    rng = np.random.default_rng(2)
    X = rng.standard_normal((8, 1, 8, 8)).astype(np.float32)
    Y = rng.integers(0, 5, 8)
    steps = 20
    model, step = setup()
    sequential = [float(step(X, Y)) for _ in range(THREADS * steps)]
    want = {k: v.copy() for k, v in model.state_dict().items()}

    model, step = setup()
    losses, lock = [], threading.Lock()

    def worker(i):
        for _ in range(steps):
            loss = float(step(X, Y))
            with lock:
                losses.append(loss)

    run_threads(worker)
    assert step.step_count == THREADS * steps
    assert sorted(losses) == sorted(sequential)  # the same steps, whatever order threads took them
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value, want[name], err_msg=name)
