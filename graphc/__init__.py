"""graphc: a static-graph deep-learning compiler that runs on numpy (and cupy).

>>> import numpy as np, graphc as gc
>>> from graphc import nn
>>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
>>> plan = gc.compile(model, example_inputs=(np.zeros((16, 4), np.float32),))
>>> plan(np.ones((3, 4), np.float32)).shape
(3, 2)
"""
from . import ir  # noqa: F401  (first: everything below builds on the IR)
from .ir.errors import (DeviceError, GraphcError, NonFiniteError, PlanFormatError, ShapeError, TraceError,  # noqa: F401
                        VerifyError)
from .ir.types import DType

float32, float64, int64, bool_, float16 = DType.float32, DType.float64, DType.int64, DType.bool, DType.float16
uint8 = DType.uint8
int8, int16, int32, uint16, uint32, uint64 = DType.int8, DType.int16, DType.int32, DType.uint16, DType.uint32, DType.uint64
bfloat16 = DType.bfloat16  # bfloat16 and the float8 types hold ml_dtypes' arrays (the ml_dtypes extra)
float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz = (DType.float8_e4m3fn, DType.float8_e4m3fnuz,
                                                                DType.float8_e5m2, DType.float8_e5m2fnuz)
# PyTorch's aliases (torch.float ...); left out of __all__ so `from graphc import *` keeps the builtin float
float, double, long, half = float32, float64, int64, float16  # noqa: A001
int, short = int32, int16  # noqa: A001  (torch.int is int32)
complex64, complex128 = DType.complex64, DType.complex128
cfloat, cdouble = complex64, complex128  # PyTorch's aliases

from .random import Generator, manual_seed  # noqa: E402
from .core.tensor import Tensor  # noqa: E402
from .core.device import device  # noqa: E402
from .core.device import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format  # noqa: E402,F401
from .core.size import Size  # noqa: E402  (torch.Size)
from .ops.creation import (arange, as_tensor, cat, concat, empty, from_numpy, full,  # noqa: E402
                       ones, ones_like, rand, rand_like, randn, randn_like, stack, tensor, zeros, zeros_like)
from . import autograd  # noqa: E402
from .core.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled  # noqa: E402
from .ops import functions as _functions, surface as _surface  # noqa: E402
from .ops import functions_nn as _functions_nn  # noqa: E402,F401  (F.gelu, gc.layer_norm, Tensor.erf, ...)
from .ops import functions_conv as _functions_conv  # noqa: E402,F401  (F.conv_transpose2d, F.fold, ...)
from .ops import functions_conv3d as _functions_conv3d  # noqa: E402,F401  (F.conv3d, F.conv_transpose3d)
from .ops import functions_math as _functions_math  # noqa: E402,F401  (gc.tan, gc.atan2, Tensor.fmod_, ...)
from .ops import functions_bitwise as _functions_bitwise  # noqa: E402,F401  (gc.bitwise_and, Tensor.__and__, ...)
from .ops import functions_special as _functions_special  # noqa: E402,F401  (gc.lgamma, Tensor.erfinv, ...)
from .core import inplace as _inplace  # noqa: E402,F401
from .ops import reductions as _reductions, shaping as _shaping  # noqa: E402,F401
from .ops import reductions_more as _reductions_more  # noqa: E402,F401  (all, any, prod, cumsum, var, std, norm, ...)
from .ops import shaping_more as _shaping_more  # noqa: E402,F401  (flip, roll, movedim, diagonal, diag, ...)
from .ops.shaping_more import broadcast_shapes, eye, linspace, logspace  # noqa: E402,F401
from .ops import random_more as _random_more  # noqa: E402,F401  (bernoulli, multinomial, Tensor.exponential_, ...)
from .ops.random_more import normal, randint, randint_like  # noqa: E402,F401
from .ops.segment_ops import segment_reduce  # noqa: E402,F401
from .ops import linalg_legacy as _linalg_legacy  # noqa: E402,F401  (gc.det, gc.svd, Tensor.cholesky, ...)
from .ops import shaping_views as _shaping_views  # noqa: E402,F401  (select, unflatten, Tensor.unfold, *_copy, ...)
from .ops import shaping_splits as _shaping_splits  # noqa: E402,F401  (tensor_split, hstack, meshgrid, kron, ...)
from .ops import shaping_scatter as _shaping_scatter  # noqa: E402,F401  (select_scatter, as_strided_copy, rot90, ...)
from .ops import creation_more as _creation_more  # noqa: E402,F401  (fill, full_like, empty_like, scalar_tensor, ...)
from .ops import scatter_ops as _scatter_ops, index_ops as _index_ops  # noqa: E402,F401  (gather, scatter*, index_*, take, put)
from .ops import sorting as _sorting  # noqa: E402,F401  (sort, argsort, kthvalue, median, mode, quantile)
from .ops import searching as _searching  # noqa: E402,F401  (searchsorted, bucketize, histc, histogram)
from .ops import data_dependent as _data_dependent  # noqa: E402,F401  (nonzero, masked_select, unique: eager only)
from .ops import masked_index as _masked_index  # noqa: E402,F401  (gc._unsafe_masked_index, ...)
from .ops import sparse_ops as _sparse_ops  # noqa: E402,F401  (gc.sparse_coo_tensor, gc.spmm, Tensor.to_sparse)
from .ops import random_ints as _random_ints  # noqa: E402,F401  (randperm)
from .ops import functions_blas as _functions_blas  # noqa: E402,F401  (addmm, baddbmm, mv, dot, einsum, tensordot, ...)
from .ops import functions_math_more as _functions_math_more  # noqa: E402,F401  (addcmul, lerp, logaddexp, sinc, ...)
from .ops import functions_compare as _functions_compare  # noqa: E402,F401  (isclose, allclose, equal, isin)
from .ops import functions_distance as _functions_distance  # noqa: E402,F401  (cross, cdist, dist)
from .ops import reductions_scan as _reductions_scan  # noqa: E402,F401  (cummax, logcumsumexp, diff, trapezoid, nansum, ...)
from .ops import reductions_stats as _reductions_stats  # noqa: E402,F401  (cov, corrcoef)
from .ops import complex_ops as _complex_ops  # noqa: E402  (gc.real, gc.conj, gc.angle, gc.complex, ...)
from .ops import spectral as _spectral  # noqa: E402,F401  (gc.stft, Tensor.stft)
from .ops import aten as _aten  # noqa: E402,F401  (gc.ops.aten.x: torch.ops.aten.x; gc.native_layer_norm, ...)

_surface.install(Tensor)  # Tensor.relu, .clamp, .eq, ...: each declared once in graphc/ops/functions.py
from .core.out_arg import with_out as _with_out  # noqa: E402
globals().update({_name: _with_out(_fn) for _name, _fn in _surface.TOP_LEVEL.items()})  # gc.relu, gc.clamp, ...: out= too
for _name, _fn in _complex_ops.PROPERTIES.items():  # Tensor.real, Tensor.imag: properties, as PyTorch's
    setattr(Tensor, _name, property(_fn))
from . import nn  # noqa: E402
# torch.selu, torch.max_pool1d, ...: the F functions PyTorch also has at the top with the same signature
_TOP_FROM_F = ("selu", "celu", "prelu", "threshold", "max_pool1d", "max_pool2d", "avg_pool1d", "adaptive_avg_pool1d",
               "pixel_shuffle", "pixel_unshuffle")
globals().update({_name: getattr(nn.functional, _name) for _name in _TOP_FROM_F})
from .compile import compile, export, load  # noqa: E402
from . import jit  # noqa: E402  (gc.jit.trace is the tracer; gc.trace is torch.trace, the matrix trace)
from .core.custom_ops import custom_op  # noqa: E402
from .core.control_flow import cond, scan, while_loop  # noqa: E402
from .serialization import save  # noqa: E402
from . import data, debug, distributed, optim  # noqa: E402
from . import viz  # noqa: E402
from . import sparse  # noqa: E402  (torch.sparse: mm, addmm, FloatTensor)
from . import distributions  # noqa: E402  (torch.distributions: Categorical, Normal, ...)
from . import special  # noqa: E402  (torch.special: gc.special.erfcx, gc.special.zeta, ...)
from . import signal  # noqa: E402  (torch.signal.windows: hann, kaiser, ...)
from . import linalg  # noqa: E402  (torch.linalg on numpy's LAPACK)
from . import fft  # noqa: E402  (torch.fft: numpy.fft / cupy.fft kernels)
from .executor import Plan  # noqa: E402

from .ir._version import __version__  # noqa: E402  (the one place the version is written)

__all__ = sorted({
    "__version__", "DType", "DeviceError", "Generator", "GraphcError", "NonFiniteError", "Plan", "PlanFormatError",
    "ShapeError",
    "Tensor", "TraceError", "VerifyError", "arange", "as_tensor", "bool_", "cat", "compile", "concat", "cond", "custom_op", "data",
    "debug",
    "device", "empty", "enable_grad", "export", "float16", "float32", "float64", "from_numpy", "full",
    "inference_mode", "int64", "is_grad_enabled", "jit", "load", "set_grad_enabled", "autograd", "manual_seed", "nn", "no_grad", "ones", "ones_like",
    "optim", "special", "rand", "rand_like", "randn", "randn_like", "save", "scan", "stack", "tensor", "trace", "uint8", "viz", "while_loop", "zeros", "zeros_like",
    "complex64", "complex128",
    *_surface.TOP_LEVEL, *_TOP_FROM_F})

# PyTorch-compatibility shims (issue #34): torch.cuda, torch.backends, torch.onnx.export, legacy tensor types
from . import backends, cuda, onnx  # noqa: E402,F401
from . import masked  # noqa: E402,F401  (torch.masked: sum, amax, softmax, ... with mask=)
from .tensor_types import (BoolTensor, DoubleTensor, FloatTensor, LongTensor, get_default_dtype,  # noqa: E402,F401
                           set_default_dtype)
