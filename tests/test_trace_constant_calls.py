"""A submodule called on constants while its model is traced still reads its parameters as graph
state: a position embedding of ``arange(T)`` trains, and a plan sees later weight updates
(before, the call ran eagerly and froze the weight into a constant, silently)."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from plan_edit import rewrite_body


class WithPositions(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = nn.Embedding(4, 3)
        self.head = nn.Linear(3, 2)

    def forward(self, x):
        positions = gc.arange(0, 4)  # a constant: not derived from any traced input
        return self.head(x + self.pos(positions))


def test_parameters_of_a_submodule_called_on_constants_are_state_and_train():
    gc.manual_seed(0)
    model = WithPositions()
    x, y = np.ones((2, 4, 3), np.float32), np.zeros((2, 4), np.int64)
    loss_fn = lambda out, t: nn.functional.cross_entropy(out.reshape(-1, 2), t.reshape(-1))  # noqa: E731
    step = gc.compile(model, (x, y), loss_fn=loss_fn, optimizer=optim.SGD(model.parameters(), lr=0.5))
    assert "@pos.weight" in str(step.graph)
    assert all(c.type.dtype.name == "int64" for c in step.graph.constants.values() if c.type.rank)  # only arange
    before = model.pos.weight.numpy().copy()
    step(x, y)
    assert not np.array_equal(model.pos.weight.numpy(), before)


def test_an_inference_plan_reads_the_current_weights():
    gc.manual_seed(0)
    model = WithPositions().eval()
    x = np.ones((2, 4, 3), np.float32)
    plan = gc.compile(model, (x,))
    model.pos.weight.array[...] += 1.0  # the plan shares the model's storage
    np.testing.assert_allclose(plan(x), model(gc.tensor(x)).numpy(), rtol=1e-6)


class MaybeLoss(nn.Module):
    """Returns ``(logits, None)`` without targets, as GPT-style models do."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x, targets=None):
        logits = self.fc(x)
        loss = None if targets is None else nn.functional.cross_entropy(logits, targets)
        return logits, loss


def test_none_outputs_come_back_as_none_from_compiled_and_loaded_plans(tmp_path):
    gc.manual_seed(0)
    model = MaybeLoss().eval()
    x = np.ones((2, 3), np.float32)
    logits, loss = gc.compile(model, (x,))(x)
    assert loss is None and logits.shape == (2, 2)
    gc.export(model, (x,), tmp_path / "m.graphc")
    logits2, loss2 = gc.load(tmp_path / "m.graphc")(x)
    assert loss2 is None
    np.testing.assert_allclose(logits2, logits, rtol=1e-6)


@pytest.mark.parametrize("bad", ["1", [1, 1], [-1], [True], [2, 1]])
def test_hostile_none_outputs_are_refused(tmp_path, bad):
    model = MaybeLoss().eval()
    x = np.ones((2, 3), np.float32)
    gc.export(model, (x,), tmp_path / "m.graphc")
    rewrite_body(tmp_path / "m.graphc", lambda body: body["graph"]["meta"].update(none_outputs=bad))
    with pytest.raises(gc.PlanFormatError, match="none_outputs"):
        gc.load(tmp_path / "m.graphc")
