"""``nn.parallel.DistributedDataParallel``: a model whose compiled training plan averages its
gradients over the processes of an MPI job (graphc.distributed)."""
from __future__ import annotations

from ..ir.errors import GraphcError
from .module import Module

DEFAULT_BUCKET_MB = 25  # PyTorch's bucket_cap_mb


class DistributedDataParallel(Module):
    """Wrap ``module`` for data-parallel training, as in PyTorch.

    At wrap time every process checks that its model has the same parameters as rank 0's and
    takes rank 0's values (parameters and buffers), so all processes start identical. A plan
    compiled from the wrapper (``gc.compile(ddp, inputs, loss_fn, optimizer)``, or a traced step
    function that calls it) averages every gradient across the processes in the graph, in
    buckets of about ``bucket_cap_mb`` (one MPI message each, the output layers first, as
    PyTorch orders them), before the non-finite guard and the optimizer update: every process
    applies the same update. The state dict holds the model under ``module.``, as PyTorch's.
    Eager ``loss.backward()`` through the wrapper's output averages the same way, with the
    same ``allreduce`` buckets run eagerly.

    ``device_ids`` and ``output_device`` are accepted for PyTorch scripts and ignored (the model
    stays where it is).
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, broadcast_buffers: bool = True,
                 bucket_cap_mb: float = DEFAULT_BUCKET_MB, find_unused_parameters: bool = False):
        from .. import distributed as dist

        super().__init__()
        if not isinstance(module, Module):
            raise GraphcError(f"DistributedDataParallel wraps an nn.Module, got {type(module).__name__}")
        if not dist.is_initialized():
            raise GraphcError(f"DistributedDataParallel: {dist.NOT_INITIALIZED}")
        if not bucket_cap_mb > 0:
            raise GraphcError(f"bucket_cap_mb must be > 0, got {bucket_cap_mb!r}")
        self.module = module
        self.bucket_bytes = int(bucket_cap_mb * 2**20)
        self.broadcast_buffers = broadcast_buffers
        tensors = module.state_dict_tensors()
        layout = "\n".join(f"{name} {tuple(t.shape)} {t.dtype}" for name, t in tensors.items())
        what = "the wrapped model (the names, shapes and dtypes of its parameters and buffers)"
        dist.check_same_everywhere(layout, what)
        for tensor in tensors.values():  # every process starts from rank 0's values
            dist.broadcast(tensor, src=0)

    def forward(self, *args, **kwargs):
        out = self.module(*args, **kwargs)
        self._mark_for_eager_backward(out)
        return out

    def _mark_for_eager_backward(self, out) -> None:
        """Tag the tape entries of eager outputs, so that a ``backward()`` through them averages
        this module's gradients (traced outputs have no tape: the compiled plan averages)."""
        from ..core.tensor import Tensor

        outputs = out if isinstance(out, (tuple, list)) else (out.values() if isinstance(out, dict) else (out,))
        params = frozenset(id(p) for p in self.module.parameters())
        for t in outputs:
            if isinstance(t, Tensor) and t._grad_fn is not None:
                t._grad_fn[0].data_parallel = (self.bucket_bytes, params)


def data_parallel_spec(model) -> dict | None:
    """What the training passes need to average gradients: None unless ``model`` is, or holds,
    a DistributedDataParallel."""
    if model is None or not hasattr(model, "modules"):
        return None
    wrappers = [m for m in model.modules() if isinstance(m, DistributedDataParallel)]
    if not wrappers:
        return None
    return {"bucket_bytes": min(w.bucket_bytes for w in wrappers)}
