"""``torch.backends.cudnn``: flags that can be set and read and change nothing in graphc.

>>> from graphc.backends import cudnn
>>> cudnn.deterministic = True
>>> cudnn.deterministic, cudnn.enabled, cudnn.version()
(True, True, None)
>>> cudnn.deterministic = False  # (the flag is process-wide, as PyTorch's)
"""
from __future__ import annotations

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: graphc does not call cuDNN (its GPU convolutions are cupy im2col + cuBLAS)."""
    return False


def version():
    """None, as PyTorch answers without cuDNN."""
    return None
