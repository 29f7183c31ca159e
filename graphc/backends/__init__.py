"""``torch.backends`` flags, for files written for PyTorch (``import graphc as torch``).

``cudnn.benchmark``, ``cudnn.deterministic``, ``cudnn.enabled`` and the ``allow_tf32`` flags are
plain attributes: they can be set and read, and change nothing in graphc (its GPU kernels are
cupy's and cuBLAS's, chosen the same way every run; there is no cuDNN autotuner). ``mps`` is
never available.

>>> import graphc as gc
>>> gc.backends.cudnn.benchmark = True
>>> gc.backends.cudnn.benchmark, gc.backends.cudnn.deterministic, gc.backends.mps.is_available()
(True, False, False)
>>> gc.backends.cudnn.benchmark = False  # (process-wide, as PyTorch's)
"""
from . import cuda, cudnn, mps  # noqa: F401

__all__ = ["cuda", "cudnn", "mps"]
