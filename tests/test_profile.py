"""gc.debug.profile: per-node and per-op timings of a plan's step, leaving the plan untouched."""
import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim


def _training_plan():
    gc.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    x = np.random.default_rng(0).standard_normal((5, 1, 8, 8)).astype(np.float32)
    y = np.array([0, 1, 2, 1, 0])
    plan = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    return plan, x, y


def test_profile_covers_every_node_once_with_its_location():
    plan, x, y = _training_plan()
    report = gc.debug.profile(plan, x, y, steps=2)
    assert sorted(n.index for n in report.nodes) == list(range(len(plan.graph.nodes)))
    assert [n.ms for n in report.nodes] == sorted((n.ms for n in report.nodes), reverse=True)
    assert sum(o.count for o in report.ops) == len(plan.graph.nodes)
    assert sum(n.share for n in report.nodes) == pytest.approx(1.0)
    assert {n.phase for n in report.nodes} >= {"forward", "backward", "update"}
    conv = next(n for n in report.nodes if n.op == "conv_bn_train")
    assert conv.where.startswith("0 (Conv2d) at test_profile.py:")
    assert report.batch == 5 and report.steps == 2 and report.step_ms > 0


def test_profile_leaves_the_plan_and_its_state_unchanged():
    plan, x, y = _training_plan()
    plan(x, y)
    before = {k: v.copy() for k, v in plan.state.items()}
    rng_state = plan.rng.bit_generator.state
    gc.debug.profile(plan, x, y, steps=3)
    assert plan.step_count == 1
    assert plan.rng.bit_generator.state == rng_state
    for k, v in plan.state.items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)


def test_profile_table_lists_ops_and_slowest_nodes():
    plan, x, y = _training_plan()
    text = str(gc.debug.profile(plan, x, y, steps=1))
    lines = text.splitlines()
    assert lines[0].startswith(f"{len(plan.graph.nodes)} nodes, batch 5, cpu, mean of 1 steps")
    assert "conv_bn_train_grad" in text and "test_profile.py:" in text
    assert len(gc.debug.profile(plan, x, y, steps=1).table(limit=None).splitlines()) > len(plan.graph.nodes)


@pytest.mark.parametrize("steps", [0, -1, 1.5, True, "3"])
def test_profile_refuses_bad_step_counts(steps):
    plan, x, y = _training_plan()
    with pytest.raises(gc.GraphcError, match="steps must be a positive integer"):
        gc.debug.profile(plan, x, y, steps=steps)


def test_profile_refuses_bad_inputs_like_the_plan():
    plan, x, y = _training_plan()
    with pytest.raises(gc.GraphcError):
        gc.debug.profile(plan, x[:, :, :4], y)
