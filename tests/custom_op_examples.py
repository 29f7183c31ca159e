"""Custom op classes the tests share (the op table, tests/test_custom_op.py, the hostile-file
tests): written once, as a user writes them."""
from __future__ import annotations

import graphc as gc


class Log1pExp:
    """log(1 + e^x): the large-|x| branches never overflow; gradient sigmoid(x). Its one
    constant (the 0 of x > 0) has a zero derivative away from x = 0, so finite differences
    over every input of its custom_call agree with the backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return gc.where(x > 0, x + gc.log1p(gc.exp(-x)), gc.log1p(gc.exp(x)))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * gc.sigmoid(x)


log1pexp = gc.custom_op(Log1pExp, name="log1pexp")
