"""The memory planner: no two live values overlap, steady-state steps do not grow memory,
results are unchanged, and the memory report describes the plan."""
import tracemalloc

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.executor.memory import Buffer, assign_offsets, check_no_overlap
from graphc.executor.program import Program

STEADY_GROWTH_LIMIT = 64 * 1024  # bytes over 50 warm steps


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.stem = nn.Conv2d(3, 8, 1)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.1), nn.Linear(8, 5))

    def forward(self, x):
        out = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
        return self.head((out + self.stem(x)).relu())


def models_and_data():
    rng = np.random.default_rng(0)
    mlp = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 5))
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.AvgPool2d(2),
                        nn.Flatten(), nn.Linear(32, 5))
    images = rng.standard_normal((16, 3, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 5, 16)
    return [("mlp", mlp, rng.standard_normal((16, 20)).astype(np.float32), labels),
            ("cnn", cnn, images, labels), ("residual", Residual(), images, labels)]


MODELS = models_and_data()


def _train_plan(model, x, y, passes="default"):
    gc.manual_seed(0)
    return gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(model.parameters(), lr=0.05, momentum=0.9), passes=passes)


def test_best_fit_reuses_dead_regions():
    bufs = [Buffer(0, 100, 0, 2), Buffer(1, 50, 1, 3), Buffer(2, 100, 3, 4), Buffer(3, 30, 4, 5)]
    total = assign_offsets(bufs)
    check_no_overlap(bufs)
    assert total < sum(max(64, b.nbytes) for b in bufs)  # something was shared


@pytest.mark.parametrize("name,model,x,y", MODELS, ids=[m[0] for m in MODELS])
@pytest.mark.parametrize("passes", ["default", "none"])
def test_live_values_never_overlap(name, model, x, y, passes):
    step = _train_plan(model, x, y, passes)
    step(x, y)
    step(x[:5], y[:5])
    for program in step._programs.values():
        check_no_overlap(program.buffers)
        assert program.arena_bytes <= program.unplanned_bytes + 64 * len(program.buffers)
    infer = gc.compile(model.eval(), example_inputs=(x,), passes=passes)
    infer(x)
    for program in infer._programs.values():
        check_no_overlap(program.buffers)
    model.train()


@pytest.mark.parametrize("name,model,x,y", MODELS, ids=[m[0] for m in MODELS])
def test_planned_results_equal_unplanned(name, model, x, y):
    """The planner changes where values live, never what they are: compare a planned plan
    with one whose kernels all allocate (every kernel's 'writes_out' path disabled)."""
    import copy

    twin = copy.deepcopy(model)
    planned = _train_plan(model, x, y)
    unplanned = _train_plan(twin, x, y)
    unplanned._programs[len(x)] = Program(unplanned.graph, len(x), unplanned.backend, unplanned.rng,
                                          unplanned._constants, unplanned._state, planned=False)
    assert unplanned._programs[len(x)].arena_bytes == 0
    for _ in range(3):
        a, b = planned(x, y), unplanned(x, y)
        np.testing.assert_array_equal(a, b)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, twin.state_dict()[k], err_msg=k)


def test_steady_state_steps_do_not_grow_memory():
    _, model, x, y = MODELS[1]
    step = _train_plan(model, x, y)
    for _ in range(5):
        step(x, y)
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    for _ in range(50):
        step(x, y)
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert after - before < STEADY_GROWTH_LIMIT, f"50 warm steps grew traced memory by {after - before} bytes"


def test_memory_report_lists_arena_and_saved_activations():
    _, model, x, y = MODELS[1]
    step = _train_plan(model, x, y)
    with pytest.raises(gc.GraphcError, match="run the plan once"):
        step.memory_report()
    step(x, y)
    report = step.memory_report()
    text = str(report)
    assert report.arena_bytes > 0 and report.unplanned_bytes >= report.live_peak_bytes
    assert "saved for backward" in text and "(Conv2d) at test_memory.py:" in text
    assert report.saved and all(nbytes >= 0 for _, _, nbytes, _ in report.saved)
