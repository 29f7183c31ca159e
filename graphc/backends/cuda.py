"""``torch.backends.cuda``: ``matmul.allow_tf32`` and friends, settable flags that change
nothing in graphc (cuBLAS runs its float32 GEMMs in float32).

>>> from graphc.backends import cuda
>>> cuda.matmul.allow_tf32 = True
>>> cuda.matmul.allow_tf32, cuda.is_built()
(True, True)
>>> cuda.matmul.allow_tf32 = False  # (process-wide, as PyTorch's; False is its default)
"""
from __future__ import annotations

import types

matmul = types.SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                               allow_bf16_reduced_precision_reduction=True)


def is_built() -> bool:
    """True: graphc can run on CUDA when cupy and a GPU are present (``gc.cuda.is_available()``)."""
    return True
