"""Acceptance: the model files' own PyTorch training steps run eagerly and compiled on graphc.

Every file in ``tests/models`` carries its training recipe in plain PyTorch idiom: an
optimizer (``make_optimizer``, or GPT's ``configure_optimizers``) and a step factory
(``make_train_step(model, optimizer)``: ``zero_grad``, forward, loss, ``loss.backward()``,
optional ``clip_grad_norm_``, ``optimizer.step()``, returning the loss). Those functions are
part of the source text that ``load_model_file`` (tests/test_pytorch_models.py) executes
once as real PyTorch and once with ``torch`` resolved to graphc, so the step function is the
same code on both sides. For every file, from the same weights (graphc builds them with
``gc.manual_seed``, PyTorch's twin loads its ``state_dict``) and on the same batches:

- PyTorch runs the step eagerly (through the ``torch_ref`` fixture: without torch, its
  outputs come from tests/data/torch_test_pytorch_loops.npz; ``pytest --record-torch-refs
  tests/test_pytorch_loops.py`` regenerates it);
- graphc runs the same step eagerly (eager autograd, eager ``optimizer.step()``);
- graphc compiles it, ``gc.compile(train_step, example_inputs=(x, y))``, and calls the plan
  once per step (fresh model and optimizer for each of the three runs).

The per-step results (loss, and GPT's gradient norm) and every parameter and buffer after
the steps are compared: each graphc run against PyTorch at tests/test_pytorch_models.py's
tolerances, and graphc eager against graphc compiled at float32 rounding (``EAGER_RTOL``).

- ResNet: torchvision's SGD recipe (momentum, weight decay), cross-entropy, BatchNorm in
  training mode (running statistics and ``num_batches_tracked`` compared too).
- MobileNetV2: torchvision's RMSprop recipe (alpha 0.9, eps 0.0316, momentum, weight decay);
  dropout p = 0 (graphc's and PyTorch's random streams differ, masks cannot match). The large
  eps is what makes this comparable: the BatchNorm bias after a block's linear 1x1 projection
  feeds the next 1x1 convolution and its BatchNorm with nothing nonlinear between, so its
  gradient is mathematically zero and computed as float32 noise. With eps = 1e-8, RMSprop
  divides that noise by its own root-mean-square and takes lr-sized steps (measured: those
  biases then differ from PyTorch's by 0.03, 1e4 times the tolerance); with 0.0316 the noise
  stays noise. (No convolution here has a bias before BatchNorm.)
- The MNIST example: its ``train()`` function runs unchanged on graphc (eager
  ``loss.backward()``, ``optimizer.step()``, ``loss.item()``), Adadelta with StepLR stepped
  once per epoch, its ``test()`` after every epoch; then ``make_train_step`` compiled once and
  run for the same epochs, the scheduler changing the learning rate between them (a plan
  input: no recompilation). Dropout p = 0.
- GPT: nanoGPT's step: ``configure_optimizers``' AdamW groups (2-D weights decay, LayerNorm
  weights do not), the model's own loss, ``clip_grad_norm_`` with a ``max_norm`` small enough
  that every step clips (asserted: the returned norm exceeds it), ``zero_grad(set_to_none=
  True)``; with gradient accumulation over two micro-batches as well; and once with SGD,
  where clipping scales the update itself (AdamW's normalisation nearly undoes a uniform
  scale of the gradients, so a wrong clip factor would hide there). The GPT is built with
  ``bias=False``, nanoGPT's training default: with biases, the key slice of ``c_attn.bias``
  has a mathematically zero gradient (softmax removes a constant added to all of a query's
  scores) that AdamW turns into lr-sized noise steps (see test_gpt_training_matches_torch).
"""
from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import graphc as gc
from conftest import HAVE_TORCH
from graphc.data import DataLoader, TensorDataset
from test_pytorch_models import (ATOL, EPOCHS, LOSS_LINE, RTOL, SEED, TEST_BATCH, TRAIN_BATCH, TRAIN_N, Args,
                                 assert_state_matches, load_model_file, mnist_refs, mnist_setup, recorded_state,
                                 snapshot, token_batches, torch_state)

if HAVE_TORCH:
    import torch

# graphc against PyTorch: RTOL, ATOL of tests/test_pytorch_models.py (PyTorch's update rules
# exactly, so three steps agree to float32 rounding; the two libraries sum in different orders).
# Measured here: at most 0.44 of the tolerance (GPT's c_attn.weight under AdamW), losses and
# gradient norms within 5e-7.
#
# graphc eager against graphc compiled: the eager backward() runs the autodiff pass and the
# registry's vjp rules, the eager optimizer.step() the optimizer pass's update formulas, on the
# same backend kernels as the plan. Only the plan's fusions (conv + BatchNorm, linear + ReLU,
# ...) may group the same float32 terms differently, so the two agree to a few float32 ulps:
# rtol 1e-6 (8 ulps), and 1e-7 of the tensor's largest magnitude for elements far below it.
# Measured: bitwise equal for every model here.
EAGER_RTOL = 1e-6
EAGER_ATOL = 1e-7
STEPS = 3
BATCH = 8
GRAD_CLIP = 0.25  # the gradient norm of the tiny GPT is about 1 in these steps: every step clips
GPT_OPT = {"weight_decay": 0.1, "learning_rate": 1e-2, "betas": (0.9, 0.95)}
GPT_SGD = {"lr": 0.5, "momentum": 0.9}
ACCUMULATION = 2


def image_batches(shape, classes=10, seed=1):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((BATCH, *shape)).astype(np.float32), rng.integers(0, classes, BATCH).astype(np.int64))
            for _ in range(STEPS)]


def gpt_batches():
    """Next-token batches of 4 sequences of 8 tokens."""
    return token_batches(STEPS, batch=4)


def gpt_micro_batches():
    """The same batches as ``gpt_batches``, each cut into ``ACCUMULATION`` micro-batches
    stacked on a leading dim (``X[i]`` is micro-step i's batch)."""
    return [tuple(a.reshape(ACCUMULATION, -1, a.shape[-1]) for a in xy) for xy in gpt_batches()]


def gpt(m):
    return m.GPT(m.GPTConfig(dropout=0.0, bias=False))


@dataclass
class Loop:
    file: str
    build: Callable  # module -> model
    optimizer: Callable  # (module, model) -> optimizer
    step: Callable  # (module, model, optimizer) -> train_step
    batches: Callable  # () -> [(x, y)] * STEPS
    clips: bool = False  # the step returns (loss, gradient norm before clipping)


LOOPS = {
    "resnet": Loop("resnet", lambda m: m.resnet_tiny(), lambda m, model: m.make_optimizer(model),
                   lambda m, model, opt: m.make_train_step(model, opt), lambda: image_batches((3, 16, 16))),
    "mobilenetv2": Loop("mobilenetv2", lambda m: m.mobilenet_v2_tiny(dropout=0.0),
                        lambda m, model: m.make_optimizer(model), lambda m, model, opt: m.make_train_step(model, opt),
                        lambda: image_batches((3, 32, 32))),
    "gpt": Loop("gpt", gpt, lambda m, model: model.configure_optimizers(**GPT_OPT),
                lambda m, model, opt: m.make_train_step(model, opt, grad_clip=GRAD_CLIP), gpt_batches, clips=True),
    "gpt_accumulation": Loop("gpt", gpt, lambda m, model: model.configure_optimizers(**GPT_OPT),
                             lambda m, model, opt: m.make_accumulating_train_step(model, opt, ACCUMULATION,
                                                                                  grad_clip=GRAD_CLIP),
                             gpt_micro_batches, clips=True),
    "gpt_sgd": Loop("gpt", gpt, lambda m, model: m.torch.optim.SGD(model.parameters(), **GPT_SGD),
                    lambda m, model, opt: m.make_train_step(model, opt, grad_clip=GRAD_CLIP), gpt_batches,
                    clips=True),
}


def build(case: str, lib: str, state: dict | None = None):
    """``(model file module, model in training mode)``: graphc's from the seed, PyTorch's
    holding ``state`` (strict load)."""
    loop = LOOPS[case]
    m = load_model_file(loop.file, lib)
    if lib == "graphc":
        gc.manual_seed(SEED)
        model = loop.build(m)
    else:
        torch.manual_seed(SEED)
        model = loop.build(m)
        model.load_state_dict({k: torch.from_numpy(np.array(v, copy=True)) for k, v in state.items()}, strict=True)
    return m, model.train()


def group_names(model, optimizer) -> list:
    names = {id(p): n for n, p in model.named_parameters()}
    return [",".join(names[id(p)] for p in g["params"]) for g in optimizer.param_groups]


def hyper_parameters(optimizer) -> list:
    """The recipe as the fingerprint of torch's reference: each group's settings and size."""
    return [sorted((k, v) for k, v in g.items() if k != "params") + [("size", len(g["params"]))]
            for g in optimizer.param_groups]


def as_floats(result) -> list:
    """The step's return value (a loss, or ``(loss, norm)``) as Python floats, whichever library
    and whether eager (tensors) or compiled (numpy arrays)."""
    values = result if isinstance(result, (tuple, list)) else (result,)
    return [float(v.item()) if hasattr(v, "item") else float(v) for v in values]


def torch_loop(case: str, state: dict, batches: list) -> dict:
    """PyTorch's eager run of the file's unchanged train_step."""
    m, model = build(case, "torch", state)
    optimizer = LOOPS[case].optimizer(m, model)
    train_step = LOOPS[case].step(m, model, optimizer)
    results = [as_floats(train_step(torch.from_numpy(x), torch.from_numpy(y))) for x, y in batches]
    return {"results": np.array(results), "groups": np.array(group_names(model, optimizer)),
            **recorded_state(torch_state(model))}


def graphc_loop(case: str, batches: list, compiled: bool):
    """graphc's run of the same train_step, eager or through ``gc.compile``: ``(model,
    optimizer, per-step results)``; with ``compiled``, also the plan."""
    m, model = build(case, "graphc")
    optimizer = LOOPS[case].optimizer(m, model)
    train_step = LOOPS[case].step(m, model, optimizer)
    plan = None
    if compiled:
        before = snapshot(model)
        plan = gc.compile(train_step, example_inputs=batches[0])
        after = snapshot(model)
        assert all(np.array_equal(after[k], before[k]) for k in before), "compiling the step changed the model"
        results = [as_floats(plan(x, y)) for x, y in batches]
    else:
        results = [as_floats(train_step(gc.from_numpy(x), gc.from_numpy(y))) for x, y in batches]
    return model, optimizer, np.array(results), plan


def assert_same_run(got: dict, want: dict, what: str):
    """graphc eager against graphc compiled: float32 rounding (see EAGER_RTOL)."""
    assert list(got) == list(want)
    for key, value in got.items():
        value, expected = np.asarray(value), np.asarray(want[key])
        if value.dtype.kind != "f":
            np.testing.assert_array_equal(value, expected, err_msg=f"{what}: {key}")
            continue
        scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
        np.testing.assert_allclose(value, expected, rtol=EAGER_RTOL, atol=EAGER_ATOL * scale,
                                   err_msg=f"{what}: {key}")


@pytest.mark.parametrize("case", list(LOOPS))
def test_train_step_eager_and_compiled_match_torch(case, torch_ref):
    """The file's train_step, three steps: PyTorch eager, graphc eager, graphc compiled."""
    batches = LOOPS[case].batches()
    _, fresh = build(case, "graphc")
    state = snapshot(fresh)

    eager_model, eager_opt, eager, _ = graphc_loop(case, batches, compiled=False)
    compiled_model, compiled_opt, compiled, plan = graphc_loop(case, batches, compiled=True)
    spec = [case, hyper_parameters(eager_opt), GRAD_CLIP if LOOPS[case].clips else None]
    ref = torch_ref([spec, state, batches], lambda: torch_loop(case, state, batches))

    assert group_names(eager_model, eager_opt) == ref["groups"].tolist(), "optimizer parameter groups differ"
    for what, model, results in (("eager", eager_model, eager), ("compiled", compiled_model, compiled)):
        np.testing.assert_allclose(results, ref["results"], rtol=RTOL, atol=ATOL,
                                   err_msg=f"graphc {what}: per-step loss (and gradient norm) differ from torch's")
        assert_state_matches(model, ref)
    np.testing.assert_allclose(eager, compiled, rtol=EAGER_RTOL, atol=EAGER_ATOL, err_msg="eager vs compiled results")
    assert_same_run(snapshot(eager_model), snapshot(compiled_model), "eager vs compiled state")
    # the plan updated the model's own storage, and its state_dict is the model's
    assert_same_run({k: np.asarray(v) for k, v in plan.state_dict().items()}, snapshot(compiled_model),
                    "plan.state_dict() vs the compiled model's")
    # every parameter trained (all of them get gradients in these models)
    trained = snapshot(eager_model)
    for name, _ in eager_model.named_parameters():
        assert not np.array_equal(trained[name], state[name]), f"{name} did not change"
    if LOOPS[case].clips:
        norms = ref["results"][:, 1]
        assert (norms > GRAD_CLIP).all(), f"torch's gradient norms {norms} do not exceed max_norm: nothing clipped"
        # nanoGPT drops the gradients after the step (zero_grad(set_to_none=True))
        assert all(p.grad is None for p in eager_model.parameters())


def test_gpt_accumulation_is_the_whole_batch():
    """Two micro-batches of 2, their losses halved and accumulated, make the same step as
    one batch of 4 (both cross-entropies are means over equally many tokens): graphc's
    accumulating step (eager and compiled) against its plain one, to float32 rounding of a
    sum split in two (the tolerances against torch)."""
    _, _, plain, _ = graphc_loop("gpt", gpt_batches(), compiled=False)
    for compiled in (False, True):
        _, _, accumulated, _ = graphc_loop("gpt_accumulation", gpt_micro_batches(), compiled=compiled)
        np.testing.assert_allclose(accumulated, plain, rtol=RTOL, atol=ATOL)


# ---- the MNIST example: train() as written, and its step compiled --------------------------------------
def test_mnist_example_eager_and_compiled(torch_ref):
    """Three epochs of the example on both libraries. PyTorch and graphc each run the file's
    ``train()`` unchanged (eagerly: ``loss.backward()``, Adadelta's ``step()``, ``loss.item()``
    printed per batch), ``test()`` after every epoch and ``scheduler.step()`` (StepLR, gamma
    0.7). Then graphc compiles ``make_train_step`` once and runs the same epochs, the scheduler
    changing the learning rate between them with no recompilation. Losses, test results and
    final weights agree with PyTorch's, and the compiled run with the eager one."""
    m = load_model_file("mnist", "graphc")
    gm, state, train, test = mnist_setup()
    ref, ref64 = mnist_refs(torch_ref, state, train, test)
    device = gc.device("cpu")
    train_loader, test_loader = (DataLoader(TensorDataset(*xy), batch_size=b) for xy, b in
                                 ((train, TRAIN_BATCH), (test, TEST_BATCH)))

    # eager: the example's own loop
    optimizer, scheduler = m.make_optimizer(gm)
    for epoch in range(1, EPOCHS + 1):
        assert optimizer.param_groups[0]["lr"] == pytest.approx(float(ref[f"lr{epoch}"]), rel=1e-12)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            m.train(Args, gm, device, train_loader, optimizer, epoch)
            test_loss, correct = m.test(gm, device, test_loader)
        losses = [float(v) for v in LOSS_LINE.findall(printed.getvalue())]
        # both sides print the loss with 6 decimals: two roundings (5e-7 each) plus float32 agreement
        np.testing.assert_allclose(losses, ref[f"losses{epoch}"], rtol=RTOL, atol=1e-6, err_msg=f"eager epoch {epoch}")
        want_loss, want_correct = ref[f"test{epoch}"]
        assert correct == int(want_correct), f"epoch {epoch}: {correct} correct, torch {int(want_correct)}"
        np.testing.assert_allclose(test_loss, want_loss, rtol=RTOL, err_msg=f"eager epoch {epoch} test loss")
        scheduler.step()
    assert_state_matches(gm, ref, ref64=ref64)
    eager_state = snapshot(gm)

    # compiled: make_train_step, one plan for every epoch
    cm, _, _, _ = mnist_setup()
    assert all(np.array_equal(v, state[k]) for k, v in snapshot(cm).items())
    optimizer, scheduler = m.make_optimizer(cm)
    step = gc.compile(m.make_train_step(cm, optimizer), example_inputs=(train[0][:TRAIN_BATCH],
                                                                        train[1][:TRAIN_BATCH]))
    assert "lr" in step.hyper_inputs, "the learning rate should be a plan input"
    graph = step.graph
    for epoch in range(1, EPOCHS + 1):
        assert optimizer.param_groups[0]["lr"] == pytest.approx(float(ref[f"lr{epoch}"]), rel=1e-12)
        cm.train()
        losses = [float(step(train[0][i:i + TRAIN_BATCH], train[1][i:i + TRAIN_BATCH]))
                  for i in range(0, TRAIN_N, TRAIN_BATCH)]
        # torch's printed losses: one rounding to 6 decimals (5e-7) plus float32 agreement
        np.testing.assert_allclose(losses, ref[f"losses{epoch}"], rtol=RTOL, atol=1e-6,
                                   err_msg=f"compiled epoch {epoch}")
        scheduler.step()
    assert step.graph is graph, "changing the learning rate recompiled the plan"
    assert_state_matches(cm, ref, ref64=ref64)
    assert_same_run(snapshot(cm), eager_state, "MNIST compiled vs eager state")
