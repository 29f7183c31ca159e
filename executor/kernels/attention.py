"""Kernels of the attention core: ``attention`` (softmax(q @ k.T * scale + mask) @ v) and its
fused backward ``attention_grad``.

Both work one head group at a time: a group is a block of the leading (batch, head) dims whose
scores fit ``HOST_BLOCK`` elements (one head at least), reached by basic indexing (views, no
copies). The scores go into one workspace (``scratch``: per thread, shared by every attention
kernel, reused from one step to the next): one GEMM writes them, the scale, mask, exp, row sums
(a GEMV with a vector of ones, much faster than numpy's reduction over a short last axis) and
the division run in place, and a second GEMM writes the output. The backward recomputes the
weights of each group the same way (bit for bit) and never holds more than a group's ``(L, S)``
weights and their cotangent; it reads neither the weights nor the output from the forward.

The shift by each row's maximum (numpy reduces a short last axis slowly) is skipped on the
CPU when it cannot matter: when no score exceeds ``log(dtype max / S) - 1`` (so exp cannot
overflow) and every row sum of the unshifted exps is at least ``S * exp(log(dtype tiny) + 30)``
(so each row's largest score is far enough above the underflow that whatever underflows
weighs less than ``e**-30`` of the row's mass). Otherwise the group is recomputed with the
shift, which also gives rows with no key left zeros. On a GPU the shift is always taken (the
checks would synchronise with the host). Written against the array module ``xp`` only, so the
cupy backend runs the same code (it has not been run on a GPU here).
"""
from __future__ import annotations

import math
import threading

import numpy as np

from .base import writes_out

HOST_BLOCK = 1 << 17  # scores per head group on the CPU: 512 KiB in float32, kept in cache across the steps
DEVICE_BLOCK = 1 << 24  # on a GPU the groups only bound the workspace


def _prod(dims) -> int:
    out = 1
    for d in dims:
        out *= int(d)
    return out


_THREAD = threading.local()


def scratch(xp, role: str, shape, dtype):
    """A workspace of ``shape`` that every attention kernel running on this thread shares: a
    thread runs one kernel at a time, and calls on other threads (a plan's concurrent callers)
    get their own. So a group's weights exist once per thread, not once per layer; the buffer
    grows to the largest group asked for and is reused from then on."""
    pool = getattr(_THREAD, "pool", None)
    if pool is None:
        pool = _THREAD.pool = {}
    device = None if xp.__name__ == "numpy" else xp.cuda.runtime.getDevice()
    key = (xp.__name__, device, role, np.dtype(dtype).str)
    size = _prod(shape)
    buffer = pool.get(key)
    if buffer is None or buffer.size < size:
        buffer = pool[key] = xp.empty(max(size, 1), dtype)
    return buffer[:size].reshape(shape)


def scratch_bytes() -> int:
    """Bytes of this thread's attention workspaces (what a memory report's arena leaves out)."""
    return sum(int(b.nbytes) for b in getattr(_THREAD, "pool", {}).values())


class _Groups:
    """The head groups of one node's shapes, the workspace shapes for the largest, the causal
    mask and the limits of the unshifted softmax."""

    def __init__(self, xp, spec):
        q_t, k_t, v_t = spec.in_types[:3]
        self.xp, self.on_host = xp, xp.__name__ == "numpy"
        lead = tuple(int(d) for d in q_t.shape[:-2])
        length, source = int(q_t.shape[-2]), int(k_t.shape[-2])
        self.lead, self.scores_shape = lead, lead + (length, source)
        self.scale, dtype = spec.attrs["scale"], q_t.dtype.numpy
        per_head = length * source
        budget = HOST_BLOCK if self.on_host else DEVICE_BLOCK
        if _prod(lead) * per_head <= budget or not lead:
            self.index, group = [()], lead
        else:  # split at the first leading axis below which a slice fits the budget (one head at least)
            axis = next((a for a in range(len(lead)) if _prod(lead[a + 1:]) * per_head <= budget), len(lead) - 1)
            inner = _prod(lead[axis + 1:]) * per_head
            step = max(1, budget // inner)
            outer = [()]
            for size in lead[:axis]:
                outer = [o + (i,) for o in outer for i in range(size)]
            self.index = [o + (slice(j, min(j + step, lead[axis])),) for o in outer for j in range(0, lead[axis], step)]
            group = (min(step, lead[axis]),) + lead[axis + 1:]
        self.dtype, self.group = dtype, group
        self.weights_shape, self.rows_shape = group + (length, source), group + (length, 1)
        self.ones = xp.ones((source, 1), dtype)
        self.empty = per_head == 0  # no query or no key: the output (and every gradient) is zeros
        self.causal = None
        if spec.attrs["is_causal"]:
            keep = xp.asarray(np.tri(length, source, dtype=bool))
            self.causal = (keep.astype(dtype), ~keep)  # (factor for the exps, where the shift path puts -inf)
        info = np.finfo(dtype)
        self.high = math.log(info.max) - math.log(max(source, 1)) - 1.0
        self.low_sum = max(source, 1) * math.exp(math.log(info.tiny) + 30.0)

    def workspace(self, role, shape, ix):
        """The scratch ``role`` of ``shape`` for the group ``ix`` (the last group along the split
        axis may be short)."""
        if ix and isinstance(ix[-1], slice) and ix[-1].stop - ix[-1].start < shape[0]:
            shape = (ix[-1].stop - ix[-1].start,) + shape[1:]
        return scratch(self.xp, role, shape, self.dtype)

    def masks(self, mask):
        """(additive mask, kept positions) over the whole scores shape (broadcast views)."""
        if mask is None:
            return None, None
        full = self.xp.broadcast_to(mask, self.scores_shape)
        return (None, full) if mask.dtype == bool else (full, None)

    def softmax(self, q, k, add, keep, p, rows):
        """``p`` <- the attention weights of one group (rows with no key kept: zeros)."""
        xp = self.xp
        for shifted in ((False, True) if self.on_host else (True,)):
            xp.matmul(q, xp.swapaxes(k, -1, -2), out=p)
            p *= self.scale
            if add is not None:
                p += add
            if not shifted:
                if not float(p.max()) <= self.high:  # (NaN fails too)
                    continue
                xp.exp(p, out=p)
                if keep is not None:
                    p *= keep
                elif self.causal is not None:
                    p *= self.causal[0]
                xp.matmul(p, self.ones, out=rows)
                if float(rows.min()) >= self.low_sum:
                    p /= rows
                    return p
                continue
            if keep is not None:
                xp.copyto(p, -math.inf, where=xp.logical_not(keep))
            elif self.causal is not None:
                xp.copyto(p, -math.inf, where=self.causal[1])
            xp.max(p, axis=-1, keepdims=True, out=rows)
            xp.copyto(rows, 0.0, where=rows == -math.inf)  # a row with no key: exps of -inf, all 0
            p -= rows
            xp.exp(p, out=p)
            xp.matmul(p, self.ones, out=rows)
            xp.copyto(rows, 1.0, where=rows == 0)
            p /= rows
        return p


def _attention(xp, spec):
    groups = _Groups(xp, spec)
    out_t = spec.out_types[0]

    def run(q, k, v, mask=None, out=None):
        if out is None:
            out = xp.empty(out_t.shape, dtype=out_t.dtype.numpy)
        if groups.empty:
            out[...] = 0
            return out
        add, keep = groups.masks(mask)
        for ix in groups.index:
            p = groups.softmax(q[ix], k[ix], None if add is None else add[ix], None if keep is None else keep[ix],
                               groups.workspace("weights", groups.weights_shape, ix),
                               groups.workspace("rows", groups.rows_shape, ix))
            xp.matmul(p, v[ix], out=out[ix])
        return out
    return writes_out(run)


def _attention_grad(xp, spec):
    groups = _Groups(xp, spec._replace(in_types=spec.in_types[1:]))
    mask_grad, scale = spec.attrs["mask_grad"], spec.attrs["scale"]

    def run(g, q, k, v, mask=None, out=None):
        if out is None:
            out = tuple(xp.empty(t.shape, dtype=t.dtype.numpy) for t in spec.out_types)
        dq, dk, dv = out[:3]
        if groups.empty:
            for a in out:
                a[...] = 0
            return tuple(out)
        add, keep = groups.masks(mask)
        for ix in groups.index:
            rows = groups.workspace("rows", groups.rows_shape, ix)
            p = groups.softmax(q[ix], k[ix], None if add is None else add[ix], None if keep is None else keep[ix],
                               groups.workspace("weights", groups.weights_shape, ix), rows)
            gb, dqb, dkb = g[ix], dq[ix], dk[ix]
            xp.matmul(xp.swapaxes(p, -1, -2), gb, out=dv[ix])
            ds = out[3][ix] if mask_grad else groups.workspace("d_weights", groups.weights_shape, ix)
            xp.matmul(gb, xp.swapaxes(v[ix], -1, -2), out=ds)  # dP
            ds *= p
            xp.matmul(ds, groups.ones, out=rows)  # rowsum(dP * P)
            p *= rows  # (P is not needed after dv)
            ds -= p  # dS = P * (dP - rowsum(dP * P)): the scores' cotangent (the mask's, before autodiff's sum)
            xp.matmul(ds, k[ix], out=dqb)
            dqb *= scale
            xp.matmul(xp.swapaxes(ds, -1, -2), q[ix], out=dkb)
            dkb *= scale
        return tuple(out)
    return writes_out(run)


KERNELS = {"attention": _attention, "attention_grad": _attention_grad}
