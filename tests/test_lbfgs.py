"""L-BFGS (graphc/optim/lbfgs.py) against ``torch.optim.LBFGS`` (PyTorch 2.13).

Each problem (a least-squares linear model, a small tanh MLP regression, the Rosenbrock
function on a 2-element parameter) is minimised from the same float64 start by several
``step(closure)`` calls, with ``line_search_fn`` None and ``"strong_wolfe"`` and a short
history (3 pairs, so the oldest pairs are dropped). After every step the loss the step
returned, the parameters, ``func_evals`` and ``n_iter`` are compared with PyTorch's (live, or
its recording in tests/data/torch_test_lbfgs.npz), and at the end the state (``d``, ``t``,
``H_diag``, ``prev_loss``, the history).

Tolerance: float64 on both sides, the same formulas in the same order; what differs is last-bit
rounding (PyTorch's ``add_(alpha=)`` fuses a multiply-add, dot products and the matmuls of the
closures sum in another order). L-BFGS feeds those ulps back through curvature pairs
``1 / (y.s)`` and line-search interpolations, so they grow over the tens of iterations per step
(measured: up to ~1e-10 relative on the linear and MLP problems, ~4e-8 on Rosenbrock, whose
curved valley amplifies them about 50x per step); RTOL = 1e-6 leaves room and still catches
any formula difference (those show up at 1e-3 or more). The evaluation counts must be equal:
they count the same branches taken.

Then, without PyTorch: a compiled closure (``gc.compile(closure, ())``) takes the eager
closure's path; a traced ``step`` and ``gc.compile(optimizer=LBFGS)`` are refused,
``state_dict``/``load_state_dict`` resume exactly, and the constructor's checks.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn
from graphc.errors import GraphcError
from graphc.optim.lbfgs import LBFGS
from conftest import HAVE_TORCH

if HAVE_TORCH:
    import torch

RTOL, ATOL = 1e-6, 1e-10
STEPS = 4


# ---- the problems: numpy data and start, one loss written once for both libraries ----------------
def linreg_problem():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 5))
    y = x @ rng.normal(size=(5, 1)) + 0.3 + 0.1 * rng.normal(size=(32, 1))
    start = [rng.normal(size=(5, 1)), np.zeros(1)]
    return {"x": x, "y": y}, start


def linreg_loss(params, data, ops):
    w, b = params
    return ((data["x"] @ w + b - data["y"]) ** 2).mean()


def mlp_problem():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(16, 3))
    y = np.sin(x.sum(axis=1, keepdims=True))
    start = [rng.normal(size=(3, 8)) * 0.5, np.zeros(8), rng.normal(size=(8, 1)) * 0.5, np.zeros(1)]
    return {"x": x, "y": y}, start


def mlp_loss(params, data, ops):
    w1, b1, w2, b2 = params
    hidden = ops["tanh"](data["x"] @ w1 + b1)
    return ((hidden @ w2 + b2 - data["y"]) ** 2).mean()


def rosenbrock_problem():
    return {}, [np.array([-1.5, 2.0])]


def rosenbrock_loss(params, data, ops):
    (p,) = params
    return (1 - p[0]) ** 2 + 100 * (p[1] - p[0] ** 2) ** 2


PROBLEMS = {"linreg": (linreg_problem, linreg_loss), "mlp": (mlp_problem, mlp_loss),
            "rosenbrock": (rosenbrock_problem, rosenbrock_loss)}
# name -> (problem, LBFGS keyword arguments): data, fingerprinted with the recording
CASES = {
    "linreg_fixed": ("linreg", {"lr": 0.5, "max_iter": 5, "history_size": 3}),
    "linreg_wolfe": ("linreg", {"max_iter": 6, "history_size": 3, "line_search_fn": "strong_wolfe"}),
    "mlp_fixed": ("mlp", {"lr": 0.5, "max_iter": 8, "history_size": 3}),
    "mlp_wolfe": ("mlp", {"max_iter": 8, "history_size": 3, "line_search_fn": "strong_wolfe"}),
    "rosenbrock_fixed": ("rosenbrock", {"lr": 0.02, "max_iter": 10, "history_size": 3}),
    "rosenbrock_wolfe": ("rosenbrock", {"max_iter": 5, "history_size": 3, "line_search_fn": "strong_wolfe"}),
    "rosenbrock_wolfe_max_eval": ("rosenbrock", {"max_iter": 20, "max_eval": 7, "history_size": 2,
                                                 "line_search_fn": "strong_wolfe"}),
}


def run_graphc(problem, kwargs, steps=STEPS, compiled=False):
    make, loss_of = PROBLEMS[problem]
    data, start = make()
    params = nn.ParameterList([nn.Parameter(gc.tensor(a.copy())) for a in start])
    data = {k: gc.tensor(v) for k, v in data.items()}
    opt = LBFGS(params, **kwargs)

    def closure():
        opt.zero_grad()
        loss = loss_of(list(params), data, {"tanh": gc.tanh})
        loss.backward()
        return loss

    if compiled:  # traced once; the plan puts each call's gradients on the parameters' .grad
        closure = gc.compile(closure, ())
    return trajectory(opt, closure, list(params), lambda p: p.numpy().copy(), opt.state, steps)


def run_torch(problem, kwargs, steps=STEPS):
    make, loss_of = PROBLEMS[problem]
    data, start = make()
    params = [torch.tensor(a.copy(), requires_grad=True) for a in start]
    data = {k: torch.from_numpy(v) for k, v in data.items()}
    opt = torch.optim.LBFGS(params, **kwargs)

    def closure():
        opt.zero_grad()
        loss = loss_of(params, data, {"tanh": torch.tanh})
        loss.backward()
        return loss

    return trajectory(opt, closure, params, lambda p: p.detach().numpy().copy(), opt.state[params[0]], steps)


def _array(value):
    return np.asarray(value.detach().numpy() if hasattr(value, "detach") else value, np.float64)


def trajectory(opt, closure, params, to_numpy, state, steps):
    """What each step left: its returned loss, the parameters, the counters; then the state."""
    out = {}
    for i in range(steps):
        out[f"loss{i}"] = np.asarray(float(_array(opt.step(closure))))
        state = opt.state if isinstance(opt, LBFGS) else opt.state[params[0]]
        for j, p in enumerate(params):
            out[f"step{i}.param{j}"] = to_numpy(p)
        out[f"step{i}.counts"] = np.array([state["func_evals"], state["n_iter"]], np.int64)
    for slot in ("d", "t", "H_diag", "prev_loss", "prev_flat_grad"):
        out[f"state.{slot}"] = _array(state[slot])
    out["state.history"] = np.array(len(state["old_dirs"]), np.int64)
    for slot in ("old_dirs", "old_stps", "ro"):
        for k, v in enumerate(state[slot]):
            out[f"state.{slot}{k}"] = _array(v)
    return out


def max_rel(got, want):
    return float(np.max(np.abs(got - want) / (ATOL / RTOL + np.abs(want)), initial=0.0))


@pytest.mark.parametrize("case", list(CASES))
def test_matches_torch(case, torch_ref):
    problem, kwargs = CASES[case]
    inputs = [case, problem, sorted(kwargs.items()), STEPS, PROBLEMS[problem][0]()]
    want = torch_ref(inputs, lambda: run_torch(problem, kwargs))
    got = run_graphc(problem, kwargs)
    assert sorted(got) == sorted(want)
    for key in sorted(got):
        if got[key].dtype.kind == "i":  # evaluation counts, history length: the same branches taken
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
        else:
            np.testing.assert_allclose(got[key], want[key], rtol=RTOL, atol=ATOL, err_msg=key)
    # the problem was actually being solved: the loss went down
    assert float(got[f"loss{STEPS - 1}"]) < float(got["loss0"])


@pytest.mark.parametrize("case", list(CASES))
def test_a_compiled_closure_takes_the_same_path(case):
    """``opt.step(gc.compile(closure, ()))``: the plan computes the loss and the gradients; the
    step, eager, sees the same numbers (float64, the same ops in the same order) as with the
    eager closure, which matches PyTorch (test_matches_torch), so the same branches are taken."""
    problem, kwargs = CASES[case]
    eager, compiled = run_graphc(problem, kwargs), run_graphc(problem, kwargs, compiled=True)
    assert sorted(eager) == sorted(compiled)
    for key in sorted(eager):
        np.testing.assert_allclose(compiled[key], eager[key], rtol=1e-12, atol=0, err_msg=key)


# ---- eager only ---------------------------------------------------------------------------------
def _quadratic():
    w = nn.Parameter(gc.tensor(np.array([3.0, -1.0, 0.5])))
    return w, lambda: ((w - 1.0) ** 2 * gc.tensor(np.array([1.0, 4.0, 9.0]))).sum()


def test_traced_step_is_refused():
    w, loss_of = _quadratic()
    opt = LBFGS([w])

    def train_step(x):
        def closure():
            opt.zero_grad()
            loss = loss_of() * x.sum()
            loss.backward()
            return loss
        return opt.step(closure)

    with pytest.raises(GraphcError, match="LBFGS steps run eagerly"):
        gc.compile(train_step, (np.ones(2),))


def test_compile_with_lbfgs_is_refused():
    model = nn.Linear(3, 1)
    opt = LBFGS(model.parameters())
    with pytest.raises(GraphcError, match="LBFGS steps run eagerly"):
        gc.compile(model, (np.ones((2, 3), np.float32), np.ones((2, 1), np.float32)), loss_fn=nn.MSELoss(),
                   optimizer=opt)


def test_step_needs_a_closure_and_checks_arguments():
    w, _ = _quadratic()
    with pytest.raises(GraphcError, match="closure"):
        LBFGS([w]).step()
    with pytest.raises(GraphcError, match="strong_wolfe"):
        LBFGS([w], line_search_fn="backtracking")
    with pytest.raises(GraphcError, match="parameter groups"):
        LBFGS([{"params": [w]}, {"params": [nn.Parameter(gc.tensor(np.ones(2)))]}])
    with pytest.raises(GraphcError, match="learning rate"):
        LBFGS([w], lr=-1.0)
    assert LBFGS([w], max_iter=8).param_groups[0]["max_eval"] == 10  # PyTorch's max_iter * 5 // 4


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_state_dict_resumes_exactly(line_search_fn):
    kwargs = {"lr": 0.5, "max_iter": 3, "history_size": 2, "line_search_fn": line_search_fn}
    whole = run_graphc("mlp", kwargs, steps=4)

    make, loss_of = PROBLEMS["mlp"]
    data, start = make()
    data = {k: gc.tensor(v) for k, v in data.items()}

    def setup(arrays):
        params = [nn.Parameter(gc.tensor(a.copy())) for a in arrays]
        opt = LBFGS(params, **kwargs)

        def closure():
            opt.zero_grad()
            loss = loss_of(params, data, {"tanh": gc.tanh})
            loss.backward()
            return loss
        return params, opt, closure

    params, opt, closure = setup(start)
    assert opt.state_dict()["state"] == {}
    for _ in range(2):
        opt.step(closure)
    saved = opt.state_dict()
    assert set(saved["state"][0]) >= {"func_evals", "n_iter", "d", "t", "old_dirs", "old_stps", "ro", "H_diag",
                                      "prev_flat_grad", "prev_loss"}
    assert saved["param_groups"][0]["params"] == [0, 1, 2, 3]
    opt.step(closure)  # changes the live state: the saved copy must not follow
    params2, opt2, closure2 = setup([whole[f"step1.param{j}"] for j in range(4)])  # the parameters after 2 steps
    opt2.load_state_dict(saved)
    for i in (2, 3):
        loss = float(opt2.step(closure2))
        assert loss == float(whole[f"loss{i}"])
        for j, p in enumerate(params2):
            np.testing.assert_array_equal(p.numpy(), whole[f"step{i}.param{j}"])


@pytest.mark.skipif(not HAVE_TORCH, reason="loads a state_dict made by PyTorch itself")
def test_loads_torch_state_dict():
    """PyTorch's own state_dict (tensors, the same layout) continues in graphc as in PyTorch."""
    kwargs = {"max_iter": 4, "history_size": 3, "line_search_fn": "strong_wolfe"}
    make, loss_of = PROBLEMS["rosenbrock"]
    _, start = make()
    tp = [torch.tensor(start[0].copy(), requires_grad=True)]
    topt = torch.optim.LBFGS(tp, **kwargs)

    def tclosure():
        topt.zero_grad()
        loss = loss_of(tp, {}, {})
        loss.backward()
        return loss

    topt.step(tclosure)
    gp = [nn.Parameter(gc.tensor(tp[0].detach().numpy().copy()))]
    gopt = LBFGS(gp, **kwargs)
    gopt.load_state_dict(topt.state_dict())

    def gclosure():
        gopt.zero_grad()
        loss = loss_of(gp, {}, {})
        loss.backward()
        return loss

    for _ in range(2):
        np.testing.assert_allclose(float(gopt.step(gclosure)), topt.step(tclosure).item(), rtol=RTOL)
        np.testing.assert_allclose(gp[0].numpy(), tp[0].detach().numpy(), rtol=RTOL, atol=ATOL)


def test_converged_start_returns_at_once():
    """A gradient already below tolerance_grad: one evaluation, nothing moves (PyTorch's early return)."""
    w = nn.Parameter(gc.tensor(np.array([1.0, 1.0])))
    opt = LBFGS([w])

    def closure():
        opt.zero_grad()
        loss = ((w - 1.0) ** 2).sum()
        loss.backward()
        return loss

    assert float(opt.step(closure)) == 0.0
    assert opt.state == {"func_evals": 1, "n_iter": 0}
    assert w.numpy().tolist() == [1.0, 1.0]


def test_quadratic_converges_with_strong_wolfe():
    w, loss_of = _quadratic()
    opt = LBFGS([w], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = loss_of()
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(w.numpy(), [1.0, 1.0, 1.0], atol=1e-6)
