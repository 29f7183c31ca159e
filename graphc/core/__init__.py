"""The one inherent knot of graphc's front end, kept in one room (as JAX keeps it in core.py):
a ``Tensor`` method calls ``dispatch.apply``, which records the op on the current trace
(``tracer``) or runs it now and leaves an entry on the eager tape (``tape``); both make
Tensors. The traced forms of ``backward()`` and ``optimizer.step()`` (``step_trace``), custom
ops with their own gradient (``custom_ops``), indexing, in-place writes and devices belong to
the same knot, because each both makes and handles Tensors.

Around it, leaf modules that any room may import and that import nothing of the knot:
``source`` (which line of the user's code is running), ``grad_mode`` (no_grad and friends,
per thread) and ``scalars`` (the dtype a Python scalar takes next to tensors).
"""
