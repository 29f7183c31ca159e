"""L-BFGS (PyTorch 2.13's ``torch.optim.LBFGS``): a quasi-Newton method whose ``step(closure)``
re-evaluates the loss many times (up to ``max_iter`` iterations and ``max_eval`` evaluations).

Unlike the other optimizers its update is not a graph of ops: the number of closure calls,
the line search's bracketing and the history's length all depend on the values computed, so
``step`` runs eagerly, on the parameters' arrays flattened into one vector (as PyTorch's
``_gather_flat_grad``), with PyTorch's formulas, state and termination checks in the same
order, so that the same closure from the same start takes the same path. The step itself
cannot be part of a compiled plan (``gc.compile(optimizer=)`` or a traced ``step()``: both
raise GraphcError), but the closure can: ``opt.step(gc.compile(closure, ()))`` runs the loss
and its gradients as one plan per evaluation (the plan puts them on the parameters' ``.grad``,
graphc/core/step_trace.py) and takes the same path as the eager closure.

The state lives where PyTorch keeps it, under the first parameter (``state_dict()["state"][0]``):
``func_evals``, ``n_iter``, ``d``, ``t``, ``old_dirs``, ``old_stps``, ``ro``, ``H_diag``,
``prev_flat_grad``, ``prev_loss`` and ``al``.
"""
from __future__ import annotations

import numpy as np

from ..core.tracer import current_tracer
from ..executor.backends import backend_of
from ..ir.errors import GraphcError
from .optimizer import Optimizer

# Slots that are lists of vectors in the state (the history of the two-loop recursion).
_LIST_SLOTS = ("old_dirs", "old_stps", "ro", "al")


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through ``(x1, f1)``, ``(x2, f2)`` with slopes ``g1``, ``g2``,
    clamped to ``bounds`` (default: between the two points); the midpoint when the cubic has
    no real minimiser (minFunc's polyinterp, as PyTorch)."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if not d2_square >= 0:  # complex roots: no interior minimum, bisect
        return (lo + hi) / 2.0
    d2 = np.sqrt(d2_square)
    # written from the point further along, so the division is by the larger slope change
    if x1 <= x2:
        min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(min_pos, lo), hi)


class _Bracket:
    """Two points of the line search (step, loss, gradient, directional derivative), the
    interval known to hold a point meeting the strong Wolfe conditions."""

    def __init__(self, ts, fs, gs, gtds):
        self.t, self.f, self.g, self.gtd = list(ts), list(fs), list(gs), list(gtds)

    def order(self):
        """``(low, high)``: the index of the lower loss first (ties: the first point)."""
        return (0, 1) if self.f[0] <= self.f[-1] else (1, 0)

    def set(self, i, t, f, g, gtd):
        self.t[i], self.f[i], self.g[i], self.gtd[i] = t, f, g, gtd


def _strong_wolfe(obj_func, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """PyTorch's ``_strong_wolfe`` (minFunc's lswolfe): find a step ``t`` along ``d`` meeting the
    strong Wolfe conditions. ``obj_func(t) -> (loss, flat gradient)`` evaluates at ``x + t*d``.
    Returns ``(loss, flat gradient, t, evaluations)``.

    PyTorch calls it without the group's ``tolerance_change``: the default 1e-9 applies here too."""
    d_norm = np.abs(d).max()
    f_new, g_new = obj_func(t)
    evals, ls_iter = 1, 0
    gtd_new = g_new.dot(d)
    bracket, done = None, False
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd

    # 1. bracketing: grow t until the interval [t_prev, t] must hold an acceptable point
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):  # too far: loss rose
            bracket = _Bracket([t_prev, t], [f_prev, f_new], [g_prev, g_new], [gtd_prev, gtd_new])
            break
        if abs(gtd_new) <= -c2 * gtd:  # strong Wolfe met at t itself
            bracket, done = _Bracket([t], [f_new], [g_new], [gtd_new]), True
            break
        if gtd_new >= 0:  # the slope turned: the minimum is behind t
            bracket = _Bracket([t_prev, t], [f_prev, f_new], [g_prev, g_new], [gtd_prev, gtd_new])
            break
        # extrapolate: between just past t and ten times t
        t_next = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                    bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = obj_func(t)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    if ls_iter == max_ls:  # out of evaluations: fall back to the start or the last point
        bracket = _Bracket([0, t], [f, f_new], [g, g_new], [None, None])

    # 2. zoom: shrink the bracket by cubic interpolation until the conditions hold
    insuf_progress = False
    low, high = bracket.order()
    while not done and ls_iter < max_ls:
        if abs(bracket.t[1] - bracket.t[0]) * d_norm < tolerance_change:  # the bracket is tiny
            break
        t = _cubic_interpolate(bracket.t[0], bracket.f[0], bracket.gtd[0], bracket.t[1], bracket.f[1], bracket.gtd[1])
        t, insuf_progress = _keep_off_edges(t, min(bracket.t), max(bracket.t), insuf_progress)
        f_new, g_new = obj_func(t)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket.f[low]:  # Armijo fails, or no lower than low
            bracket.set(high, t, f_new, g_new, gtd_new)
            low, high = bracket.order()
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket.t[high] - bracket.t[low]) >= 0:  # the old high becomes the new low
                bracket.set(high, bracket.t[low], bracket.f[low], bracket.g[low], bracket.gtd[low])
            bracket.set(low, t, f_new, g_new, gtd_new)
    return bracket.f[low], bracket.g[low], bracket.t[low], evals


def _keep_off_edges(t, lo, hi, insuf_progress):
    """An interpolated ``t`` within 10% of the bracket's edge makes little progress: the second
    time in a row (or at/over the edge) move it to 10% inside. Returns ``(t, insuf_progress)``."""
    eps = 0.1 * (hi - lo)
    if not min(hi - t, t - lo) < eps:
        return t, False
    if insuf_progress or t >= hi or t <= lo:
        return (hi - eps if abs(t - hi) < abs(t - lo) else lo + eps), False
    return t, True


def _two_loop(flat_grad, old_dirs, old_stps, ro, H_diag, al):
    """The L-BFGS direction ``-H g`` by the two-loop recursion over the history (``al`` is
    PyTorch's scratch list, kept in the state)."""
    q = -flat_grad
    for i in range(len(old_dirs) - 1, -1, -1):
        al[i] = old_stps[i].dot(q) * ro[i]
        q -= al[i] * old_dirs[i]
    r = q * H_diag  # the initial inverse Hessian: a scaled identity
    for i in range(len(old_dirs)):
        be_i = old_dirs[i].dot(r) * ro[i]
        r += (al[i] - be_i) * old_stps[i]
    return r


class LBFGS(Optimizer):
    """L-BFGS with PyTorch's defaults and update rule; ``line_search_fn`` is None (fixed steps of
    ``lr``) or ``"strong_wolfe"``. ``step(closure)`` needs the closure (zero the gradients, compute
    the loss, ``backward()``, return the loss) and runs eagerly. One parameter group only.

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> from graphc.optim.lbfgs import LBFGS
    >>> w = nn.Parameter(gc.tensor(np.array([3.0, -1.0])))
    >>> opt = LBFGS([w], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((w - 1.0) ** 2).sum()
    ...     loss.backward()
    ...     return loss
    >>> _ = opt.step(closure)
    >>> np.round(w.numpy(), 6).tolist()
    [1.0, 1.0]
    """

    kind = "lbfgs"

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, {"lr": lr, "max_iter": max_iter, "max_eval": max_eval,
                                  "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                                  "history_size": history_size, "line_search_fn": line_search_fn})
        if len(self.param_groups) != 1:
            raise GraphcError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        self.state: dict = {}  # PyTorch's per-step state (the module docstring lists it)

    def _check(self, group):
        super()._check(group)
        # PyTorch refuses another line search only when stepping; refusing it here says so sooner
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            raise GraphcError(f"LBFGS: only 'strong_wolfe' is supported as line_search_fn, got "
                              f"{group['line_search_fn']!r}")

    # ---- not compilable ---------------------------------------------------------------
    def spec(self, names):
        raise GraphcError("LBFGS steps run eagerly (step(closure) re-evaluates the loss a data-dependent number "
                          "of times): it cannot be compiled into a plan; call opt.step(closure) outside gc.compile")

    # ---- the parameters as one flat vector ----------------------------------------------
    def _xp(self):
        return backend_of(self._params[0].array).xp

    def _flat_grad(self):
        """Every parameter's gradient flattened and concatenated (zeros for a missing one)."""
        xp, views = self._xp(), []
        for p in self._params:
            if p.grad is None:
                views.append(xp.zeros(p.array.size, p.array.dtype))
                continue
            if tuple(p.grad.shape) != tuple(p.shape):
                raise GraphcError(f"LBFGS: a gradient of shape {tuple(p.grad.shape)} for a parameter of shape "
                                  f"{tuple(p.shape)}")
            views.append(p.grad.array.reshape(-1))
        return xp.concatenate(views)

    def _add_step(self, t, d) -> None:
        """``p += t * d`` for the slice of ``d`` belonging to each parameter, in place."""
        offset = 0
        for p in self._params:
            n = p.array.size
            p.array[...] += (t * d[offset:offset + n]).reshape(p.array.shape).astype(p.array.dtype, copy=False)
            p._version += 1  # written in place: values saved for an older backward are stale
            offset += n

    def _clone_params(self):
        return [p.array.copy() for p in self._params]

    def _set_params(self, arrays) -> None:
        for p, a in zip(self._params, arrays):
            p.array[...] = a
            p._version += 1

    def _evaluate(self, closure) -> tuple:
        """``(float loss, the closure's own result, flat gradient)`` with gradients on."""
        from ..core.grad_mode import enable_grad

        with enable_grad():
            result = closure()
        if result is None:
            raise GraphcError("LBFGS.step(closure): the closure must return the loss")
        return float(result), result, self._flat_grad()

    def _directional_evaluate(self, closure, x, t, d):
        """Loss and gradient at ``x + t*d``; the parameters go back to ``x`` after."""
        self._add_step(t, d)
        loss, _, flat_grad = self._evaluate(closure)
        self._set_params(x)
        return loss, flat_grad

    # ---- the step ---------------------------------------------------------------------
    def step(self, closure=None):
        """Up to ``max_iter`` L-BFGS iterations; returns the closure's first loss (as PyTorch)."""
        if current_tracer() is not None:
            raise GraphcError("LBFGS steps run eagerly: step(closure) cannot be traced into a compiled function "
                              "(it calls the closure a data-dependent number of times); call it outside gc.compile")
        if closure is None:
            raise GraphcError("LBFGS.step() needs a closure that re-evaluates the model and returns the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        state = self.state
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        loss, orig_loss, flat_grad = self._evaluate(closure)
        current_evals = 1
        state["func_evals"] += 1
        if np.abs(flat_grad).max() <= tolerance_grad:  # already optimal
            return orig_loss

        d, t = state.get("d"), state.get("t")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            d = self._direction(state, flat_grad, prev_flat_grad, d, t, group["history_size"])
            prev_flat_grad, prev_loss = flat_grad.copy(), loss

            # the first iteration ever scales the step by the gradient's size: no curvature known yet
            t = min(1.0, 1.0 / np.abs(flat_grad).sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)  # the directional derivative
            if gtd > -tolerance_change:  # not a descent direction (any more)
                break

            ls_func_evals = 0
            if group["line_search_fn"] == "strong_wolfe":
                x_init = self._clone_params()
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    lambda t_: self._directional_evaluate(closure, x_init, t_, d), t, d, loss, flat_grad, gtd,
                    max_ls=max_eval - current_evals)
                self._add_step(t, d)
                opt_cond = np.abs(flat_grad).max() <= tolerance_grad
            else:
                self._add_step(t, d)
                opt_cond = False
                if n_iter != max_iter:  # the last iteration's loss would go unused: not evaluated
                    loss, _, flat_grad = self._evaluate(closure)
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if np.abs(d * t).max() <= tolerance_change:  # the parameters barely moved
                break
            if abs(loss - prev_loss) < tolerance_change:  # the loss barely moved
                break

        state.update(d=d, t=t, prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    def _direction(self, state, flat_grad, prev_flat_grad, d, t, history_size):
        """The search direction; updates the history with the last step's curvature pair."""
        if state["n_iter"] == 1:  # the very first iteration: steepest descent, empty history
            state.update(old_dirs=[], old_stps=[], ro=[], H_diag=1)
            return -flat_grad
        y = flat_grad - prev_flat_grad
        s = d * t
        ys = y.dot(s)
        if ys > 1e-10:  # keep the pair only when the curvature is positive (the update stays positive definite)
            if len(state["old_dirs"]) == history_size:  # limited memory: drop the oldest pair
                for slot in ("old_dirs", "old_stps", "ro"):
                    state[slot].pop(0)
            state["old_dirs"].append(y)
            state["old_stps"].append(s)
            state["ro"].append(1.0 / ys)
            state["H_diag"] = ys / y.dot(y)  # scale of the initial inverse Hessian
        if "al" not in state:
            state["al"] = [None] * history_size
        return _two_loop(flat_grad, state["old_dirs"], state["old_stps"], state["ro"], state["H_diag"], state["al"])

    # ---- saving -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        """PyTorch's layout: the whole state under parameter 0, ``param_groups`` with indices."""
        group = self.param_groups[0]
        groups = [{**{k: v for k, v in group.items() if k != "params"}, "params": list(range(len(self._params)))}]
        state = {0: {k: (list(map(_copy, v)) if k in _LIST_SLOTS else _copy(v)) for k, v in self.state.items()}}
        return {"state": state if self.state else {}, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the hyper-parameters and the state saved by ``state_dict()`` (PyTorch's layout:
        arrays or torch tensors are taken as arrays of the parameters' dtype)."""
        groups = state_dict.get("param_groups") if isinstance(state_dict, dict) else None
        if not isinstance(groups, list) or len(groups) != 1:
            raise GraphcError("LBFGS.load_state_dict: expected one param_group in the state dict")
        if len(groups[0].get("params", ())) != len(self._params):
            raise GraphcError(f"LBFGS.load_state_dict: the saved group has {len(groups[0].get('params', ()))} "
                              f"parameters, this optimizer {len(self._params)}")
        saved = (state_dict.get("state") or {})
        slots = saved.get(0, saved.get("0", {})) if saved else {}
        self.param_groups[0].update({k: v for k, v in groups[0].items() if k != "params"})
        self._check(self.param_groups[0])
        xp, dtype = self._xp(), self._params[0].array.dtype
        self.state = {k: ([self._as_array(xp, dtype, e) for e in v] if k in _LIST_SLOTS else self._as_array(xp, dtype, v))
                      for k, v in slots.items()}

    @staticmethod
    def _as_array(xp, dtype, value):
        """Vectors (and 0-d tensors) as arrays of the parameters' dtype; Python numbers kept."""
        if value is None or isinstance(value, (int, float)):
            return value
        if hasattr(value, "detach"):  # a torch tensor from PyTorch's state_dict
            value = value.detach().cpu().numpy()
        array = xp.asarray(np.asarray(value), dtype)
        return array if array.ndim else array[()]


def _copy(value):
    return value.copy() if hasattr(value, "copy") and not isinstance(value, (int, float)) else value
