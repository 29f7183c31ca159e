"""Run PyTorch's operator database (``op_db``) through graphc: the machinery behind
tests/test_op_db.py (issue #34, point 1). Needs torch and expecttest; ``python
tests/op_db_mapping.py`` prints the full report (``python tests/op_db_mapping.py 'linalg.*' sort``:
the matching entries only).

For every OpInfo entry whose dtypes include float32 on CPU, up to ``MAX_SAMPLES`` samples of
``op.sample_inputs("cpu", torch.float32, requires_grad=op.supports_autograd)``:

* name resolution, as PyTorch resolves it: ``op.name`` is a dotted path under ``torch``
  (``add``, ``nn.functional.conv2d``, ``linalg.svd``, ``special.erfcx``); when ``op.op`` is that
  attribute of ``torch``, graphc must have the same path under ``graphc``; dunder entries
  (``__radd__``, ``__getitem__``) are ``graphc.Tensor`` methods; ``aten`` operators
  (``torch.ops.aten.x``) need ``graphc.ops.aten.x``; entries whose ``op.op`` is a lambda written
  in PyTorch's test files (``lambda x: x.mT``, ``lambda x, *a: torch.normal(...)``) run that very
  lambda with its global ``torch`` bound to graphc (``import graphc as torch``), and are MISSING
  when that raises AttributeError for a name graphc lacks.
* inputs: torch tensors become graphc tensors (same numpy data, same requires_grad), nested
  lists/tuples/dicts are rebuilt, ``torch.<dtype>`` becomes ``graphc.<dtype>`` (a dtype graphc
  lacks makes the sample REFUSED), ``torch.Size`` a tuple, ``torch.device`` its string.
* forward: every tensor output is compared (dtype, shape, values) with PyTorch's on the same
  sample, eagerly and from ``gc.compile`` of ``fn(*tensor inputs)``; compile is skipped (and
  counted) when the sample has no tensor input or an output is not a tensor.
* gradients (``op.supports_autograd``): graphc's eager backward of ``sum(out * w)`` (w fixed
  random weights per float output, after PyTorch's ``output_process_fn_grad``) against
  ``torch.autograd.grad`` of the same.

Tolerances (float32 throughout): forward ``|g - t| <= ATOL * max(1, max|t|) + RTOL * |t|``
with RTOL = 1e-4, ATOL = 1e-5: float32 has ~6e-8 relative rounding, and graphc's numpy kernels
use other summation orders/algorithms than ATen (pairwise vs blocked sums, BLAS vs mkldnn,
series vs table for special functions), which moves results by a few hundred ulps on
reductions of the samples' sizes; the atol term is scaled to the output's magnitude so that
cancellation in a large-valued output is not read as an error. Gradients: RTOL_GRAD = 1e-3,
ATOL_GRAD = 1e-4 (scaled the same way): a backward composes several such kernels, and PyTorch's
own gradient tests use looser tolerances than its forward ones. Where the entry carries a
``toleranceOverride`` for float32 on CPU (or any device) for one of PyTorch's value tests
(OVERRIDE_TESTS), the larger of PyTorch's (atol, rtol) and ours is used: PyTorch's own
statement that the op is numerically harder. NaN equals NaN, and infinities must match.

PyTorch's own skips/xfails: an entry whose ``DecorateInfo`` skips or xfails (unittest.skip /
expectedFailure) one of TORCH_VALUE_TESTS for float32 on CPU has values PyTorch itself does not
hold stable there (uninitialised memory, random draws, input-order-dependent results): a value
difference on it is reported as TORCH_XFAIL, not WRONG (the list is printed). Values of random
entries (PyTorch's output changes with the seed: checked by running PyTorch under two seeds)
and of ``empty*`` entries (uninitialised memory) are not compared: dtype and shape only.
"""
from __future__ import annotations

import collections
import functools
import itertools
import math
import re
import types
import unittest

import numpy as np

import graphc as gc

import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import DecorateInfo

try:  # toleranceOverride lives in common_device_type
    from torch.testing._internal.common_device_type import toleranceOverride
except ImportError:  # pragma: no cover
    toleranceOverride = None

MAX_SAMPLES = 3
RTOL, ATOL = 1e-4, 1e-5
RTOL_GRAD, ATOL_GRAD = 1e-3, 1e-4
OVERRIDE_TESTS = {None, "test_compare_cpu", "test_variant_consistency_eager", "test_noncontiguous_samples",
                  "test_reference_numerics_normal", "test_reference_numerics_small",
                  "test_reference_numerics_large", "test_python_ref", "test_python_ref_torch_fallback",
                  "test_fn_grad", "test_numpy_ref", "test_reference_testing"}
TORCH_VALUE_TESTS = {"test_variant_consistency_eager", "test_noncontiguous_samples", "test_compare_cpu"}

PASS, MISSING, REFUSED, WRONG, TORCH_XFAIL, NA = "PASS", "MISSING", "REFUSED", "WRONG", "TORCH_XFAIL", "N/A"


class Missing(Exception):
    """graphc lacks the name PyTorch resolves the entry to."""


def entry_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


# ---- name resolution -----------------------------------------------------------------------

class _GraphcAsTorch(types.ModuleType):
    """``torch`` inside PyTorch's sample lambdas: graphc, and a lookup graphc fails is MISSING."""

    def __getattr__(self, name):
        try:
            return getattr(gc, name)
        except AttributeError:
            raise Missing(name) from None


def _lookup(root, path: str, prefix: str):
    obj = root
    for part in path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise Missing(f"{prefix}{path}") from None
    return obj


def resolve(op):
    """graphc's callable for ``op`` (raises Missing naming what graphc lacks)."""
    fn = op.op
    try:
        torch_obj = functools.reduce(getattr, op.name.split("."), torch)
    except AttributeError:
        torch_obj = None
    name = getattr(fn, "__name__", "")
    if op.name.startswith("_") and name and getattr(torch, name, None) is fn:
        return _lookup(gc, name, "")  # a private entry of a public function: torch._segment_reduce
    if torch_obj is fn:  # (torch.torch is torch: an entry named torch.ops.aten.x.default is graphc.ops.aten.x.default)
        return _lookup(gc, op.name.removeprefix("torch."), "")
    if name and getattr(torch.Tensor, name, None) is fn:  # a Tensor method itself (torch.Tensor.cfloat)
        meth = _lookup(gc.Tensor, name, "Tensor.")
        return lambda x, *a, **k: meth(x, *a, **k)
    if name.startswith("__") and getattr(torch.Tensor, name, None) is not None:
        meth = _lookup(gc.Tensor, name, "Tensor.")
        return lambda x, *a, **k: meth(x, *a, **k)
    if isinstance(fn, torch._ops.OpOverload) or isinstance(fn, torch._ops.OpOverloadPacket) \
            or getattr(fn, "__module__", "") == "torch._ops.aten":
        return _lookup(gc, "ops.aten." + op.name, "")
    if isinstance(fn, types.FunctionType):
        g = dict(fn.__globals__)
        shim = _GraphcAsTorch("torch")
        g["torch"] = shim
        for alias in ("F",):
            if alias in g:
                g[alias] = _GraphcAsTorchSub("torch.nn.functional")
        return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    raise Missing(f"{op.name} ({type(fn).__name__})")


class _GraphcAsTorchSub(types.ModuleType):
    def __getattr__(self, name):
        return _lookup(gc, self.__name__[len("torch."):] + "." + name, "")


# ---- conversion ----------------------------------------------------------------------------

def to_gc(obj, leaves=None, grad=True):
    """torch sample structure -> graphc's (tensors keep their data and requires_grad)."""
    if isinstance(obj, torch.Tensor):
        arr = obj.detach().cpu().resolve_conj().numpy().copy()
        rg = bool(grad and obj.requires_grad and obj.dtype.is_floating_point)
        t = gc.tensor(arr, requires_grad=True) if rg else gc.tensor(arr)
        if leaves is not None:
            leaves.append((obj, t))
        return t
    if isinstance(obj, torch.Size):
        return tuple(obj)
    if isinstance(obj, torch.dtype):
        name = str(obj).split(".")[-1]
        if not hasattr(gc, name):
            raise TypeError(f"graphc has no dtype {name}")
        return getattr(gc, name)
    if isinstance(obj, torch.device):
        return str(obj)
    if isinstance(obj, torch.memory_format):
        name = str(obj).split(".")[-1]
        if not hasattr(gc, name):
            raise TypeError(f"graphc has no memory format {name}")
        return getattr(gc, name)
    if isinstance(obj, tuple):
        return tuple(to_gc(o, leaves, grad) for o in obj)
    if isinstance(obj, list):
        return [to_gc(o, leaves, grad) for o in obj]
    if isinstance(obj, dict):
        return {k: to_gc(v, leaves, grad) for k, v in obj.items()}
    return obj


def flatten_out(obj, out=None):
    """Leaves of an output structure (tensors, numbers, None...), in order (a ``torch.Size`` is
    its ints: graphc returns shapes as tuples)."""
    out = [] if out is None else out
    if isinstance(obj, (tuple, list)):
        for o in obj:
            flatten_out(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            flatten_out(o, out)
    else:
        out.append(obj)
    return out


def is_gc_tensor(x):
    return isinstance(x, gc.Tensor)


def gc_np(x):
    return np.asarray(x.detach().numpy() if hasattr(x, "detach") else x.numpy())


def t_np(x):
    return x.detach().cpu().resolve_conj().resolve_neg().numpy()


# ---- comparison ----------------------------------------------------------------------------

def close(actual, expected, rtol, atol):
    """'' when equal within tolerance, else a description. NaN == NaN; infs must match."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return f"shape {actual.shape} != torch {expected.shape}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} != torch {expected.dtype}"
    if actual.size == 0:
        return ""
    if expected.dtype.kind == "c":  # real and imaginary parts compared as a trailing pair (real, imag)
        pair = lambda z: np.stack([z.real, z.imag], -1)  # noqa: E731
        bad = close(pair(actual), pair(expected), rtol, atol)
        return bad and f"(real, imag) pairs: {bad}"
    if expected.dtype.kind not in "fc":
        bad = actual != expected
        if bad.any():
            i = np.argwhere(bad)[0]
            return f"{int(bad.sum())}/{bad.size} differ, e.g. at {tuple(i)}: {actual[tuple(i)]} != torch {expected[tuple(i)]}"
        return ""
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    nan_a, nan_e = np.isnan(a), np.isnan(e)
    fin = np.isfinite(e)
    scale = float(np.abs(e[fin]).max()) if fin.any() else 1.0
    with np.errstate(invalid="ignore"):
        err = np.abs(a - e)
        ok = (err <= atol * max(1.0, scale) + rtol * np.abs(e)) | (nan_a & nan_e) | (a == e)
    ok &= nan_a == nan_e
    if ok.all():
        return ""
    i = tuple(np.argwhere(~ok)[0])
    return (f"{int((~ok).sum())}/{ok.size} differ, e.g. at {i}: {a[i]!r} != torch {e[i]!r} "
            f"(max|torch|={scale:.3g})")


def tolerances(op, grad=False):
    rtol, atol = (RTOL_GRAD, ATOL_GRAD) if grad else (RTOL, ATOL)
    if toleranceOverride is None:
        return rtol, atol
    for d in op.decorators:
        if not isinstance(d, DecorateInfo) or d.test_name not in OVERRIDE_TESTS:
            continue
        if d.device_type not in (None, "cpu") or not d.active_if:
            continue
        if d.dtypes is not None and torch.float32 not in d.dtypes:
            continue
        for dec in d.decorators:
            if isinstance(dec, toleranceOverride) and torch.float32 in dec.d:
                tol = dec.d[torch.float32]
                atol, rtol = max(atol, tol.atol), max(rtol, tol.rtol)
    return rtol, atol


def _is_skip(dec):
    if dec is unittest.expectedFailure:
        return True
    q = getattr(dec, "__qualname__", "") + repr(dec)
    return "skip" in q.lower() or "expectedFailure" in q


def torch_xfails(op) -> bool:
    """PyTorch skips/xfails one of its own value-consistency tests for float32 on CPU."""
    for d in tuple(op.skips) + tuple(op.decorators):  # skips is a list on some entries (meshgrid)
        if not isinstance(d, DecorateInfo):
            continue
        if d.test_name not in TORCH_VALUE_TESTS or d.device_type not in (None, "cpu"):
            continue
        if d.dtypes is not None and torch.float32 not in d.dtypes:
            continue
        if not (d.active_if if not callable(d.active_if) else True):
            continue
        if any(_is_skip(dec) for dec in d.decorators):
            return True
    return False


def reason(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    msg = re.sub(r"\d+", "N", msg)[:90]
    return f"{type(e).__name__}: {msg}"


# ---- one entry -----------------------------------------------------------------------------

class Result:
    def __init__(self, op):
        self.id = entry_id(op)
        self.status = PASS
        self.detail = ""
        self.grad_status = "n/a"  # PASS | REFUSED | WRONG | n/a (not differentiable / unchecked)
        self.samples = 0
        self.compile_skipped = 0
        self.torch_errors = 0
        self.values_unchecked = False
        self.missing = ""
        self.method_only = False  # MISSING as PyTorch's function, present as a graphc Tensor method
        self.grad_detail = ""

    def fail(self, status, detail):
        order = {PASS: 0, REFUSED: 1, TORCH_XFAIL: 2, WRONG: 3}
        if order[status] > order[self.status]:
            self.status, self.detail = status, detail


def _seeded(fn):
    torch.manual_seed(0)
    gc.manual_seed(0)
    return fn()


def _weights(shape, k):
    return np.random.default_rng(1000 + k).uniform(0.5, 1.5, size=shape).astype(np.float32)


def run_entry(op) -> Result:
    res = Result(op)
    if torch.float32 not in op.supported_dtypes("cpu"):
        res.status = NA
        return res
    try:
        gfn = resolve(op)
    except Missing as e:
        res.status, res.missing = MISSING, str(e)
        res.method_only = op.method_variant is not None and hasattr(gc.Tensor, op.name)
        return res
    random_values = "empty" in op.name
    xfail = torch_xfails(op)
    _OP64[0] = op.op
    rtol, atol = tolerances(op)
    grtol, gatol = tolerances(op, grad=True)
    grad_ok = None  # None: nothing checked
    samples = itertools.islice(op.sample_inputs("cpu", torch.float32, requires_grad=op.supports_autograd),
                               MAX_SAMPLES)
    for si, sample in enumerate(samples):
        args = (sample.input, *sample.args)
        kwargs = dict(sample.kwargs)
        # graphc's inputs first: in-place entries (uniform_, zero_) mutate PyTorch's
        leaves = []
        try:
            gargs = to_gc(args, leaves)
            gkwargs = to_gc(kwargs, None, grad=False)
        except Exception as e:  # noqa: BLE001 - a dtype graphc lacks
            conv_error = e
        else:
            conv_error = None
        try:
            sample_random = random_values or _torch_random(op, _clone(args), _clone(kwargs))
            tout = _seeded(lambda: op.op(*args, **kwargs))
        except Exception:
            res.torch_errors += 1
            continue
        res.samples += 1
        tleaves = [t.detach().clone() if isinstance(t, torch.Tensor) else t for t in flatten_out(tout)]
        res.values_unchecked |= sample_random
        what = f"sample {si}"
        if conv_error is not None:
            res.fail(REFUSED, f"{what} eager: {reason(conv_error)}")
            continue
        # eager forward
        try:
            gout = _seeded(lambda: gfn(*gargs, **gkwargs))
        except Missing as e:
            res.status, res.missing = MISSING, str(e)
            return res
        except Exception as e:  # noqa: BLE001 - every refusal is a finding
            name = _missing_attr(e)
            if name:
                res.status, res.missing = MISSING, name
                res.method_only = op.method_variant is not None and hasattr(gc.Tensor, op.name)
                return res
            res.fail(REFUSED, f"{what} eager: {reason(e)}")
            continue
        gleaves = flatten_out(gout)
        bad = compare_outputs(gleaves, tleaves, rtol, atol, sample_random)
        if bad and not sample_random:
            bad = _arbitrate(op, args, kwargs, bad, lambda tl64: compare_outputs(gleaves, tl64, rtol, atol, False, as64=True))
        if bad:
            res.fail(TORCH_XFAIL if xfail else WRONG, f"{what} eager: {bad}")
            continue
        # compiled forward
        gin = []
        to_gc(args, gin, grad=False)
        to_gc(kwargs, gin, grad=False)
        if not gin or not all(isinstance(x, torch.Tensor) for x in tleaves):
            res.compile_skipped += 1
        else:
            arrays = [t.numpy() for _, t in gin]
            tensors = [tt for tt, _ in gin]

            def fn(*xs, _tensors=tensors):
                table = {id(tt): x for tt, x in zip(_tensors, xs)}
                rebuilt = _substitute((args, kwargs), table)
                return gfn(*rebuilt[0], **rebuilt[1])

            try:
                plan = gc.compile(fn, example_inputs=tuple(arrays))
                cout = _seeded(lambda: plan(*arrays))
            except Exception as e:  # noqa: BLE001
                res.fail(REFUSED, f"{what} compile: {reason(e)}{_static_note(fn, arrays, tleaves, rtol, atol, sample_random)}")
                continue
            cleaves = [np.asarray(c) for c in flatten_out(cout)]
            bad = compare_outputs(cleaves, tleaves, rtol, atol, sample_random, compiled=True)
            if bad and not sample_random:
                bad = _arbitrate(op, args, kwargs, bad, lambda tl64: compare_outputs(cleaves, tl64, rtol, atol, False, compiled=True, as64=True))
            if bad:
                res.fail(TORCH_XFAIL if xfail else WRONG, f"{what} compiled: {bad}")
                continue
        # gradients
        if not op.supports_autograd or sample_random:
            continue
        g = check_grad(sample, tout, gout, leaves, grtol, gatol)
        if g is None:
            continue
        status, detail = g
        if status == PASS:
            grad_ok = True if grad_ok is None else grad_ok
        elif status == WRONG:
            res.fail(TORCH_XFAIL if xfail else WRONG, f"{what} grad: {detail}")
            grad_ok = False
        else:
            if res.grad_status != WRONG:
                res.grad_status, res.grad_detail = REFUSED, f"{what} grad: {detail}"
            grad_ok = False
    if res.samples == 0:
        res.status = NA
        return res
    if grad_ok is True and res.grad_status == "n/a":
        res.grad_status = PASS
    return res


def _substitute(obj, table):
    if isinstance(obj, torch.Tensor):
        return table.get(id(obj), obj)
    if isinstance(obj, torch.Size):
        return tuple(obj)
    if isinstance(obj, tuple):
        return tuple(_substitute(o, table) for o in obj)
    if isinstance(obj, list):
        return [_substitute(o, table) for o in obj]
    if isinstance(obj, dict):
        return {k: _substitute(v, table) for k, v in obj.items()}
    return to_gc(obj)


def compare_outputs(gleaves, tleaves, rtol, atol, random_values, compiled=False, as64=False):
    if len(gleaves) != len(tleaves):
        return f"{len(gleaves)} outputs != torch {len(tleaves)}"
    for k, (g, t) in enumerate(zip(gleaves, tleaves)):
        if isinstance(t, torch.Tensor):
            if compiled:
                a = np.asarray(g)
            elif not is_gc_tensor(g):
                return f"output {k}: {type(g).__name__} where torch returns a Tensor"
            else:
                a = gc_np(g)
            e = t_np(t)
            if as64 and e.dtype == np.float64:  # arbitration: float64 values, float32 dtype
                e = e.astype(np.float32) if a.dtype == np.float32 else e
            if random_values:
                if a.shape != e.shape or a.dtype != e.dtype:
                    return f"output {k}: {a.dtype}{a.shape} != torch {e.dtype}{e.shape}"
                continue
            bad = close(a, e, rtol, atol)
            if bad:
                return f"output {k}: {bad}"
        elif t is None:
            if g is not None:
                return f"output {k}: {type(g).__name__} where torch returns None"
        elif isinstance(t, (bool, int, float, complex)):
            gv = g.item() if is_gc_tensor(g) else g
            if isinstance(gv, np.ndarray) and gv.size == 1:
                gv = gv.item()
            if not isinstance(gv, (bool, int, float, complex, np.generic)):
                return f"output {k}: {type(g).__name__} where torch returns {type(t).__name__} {t}"
            if random_values:
                continue
            if isinstance(t, float) and isinstance(gv, (float, np.floating)) and math.isnan(t) and math.isnan(gv):
                continue
            if type(t) is bool and bool(gv) != t or not math.isclose(float(gv), float(t), rel_tol=rtol, abs_tol=atol):
                return f"output {k}: {gv!r} != torch {t!r}"
    return ""


def check_grad(sample, tout, gout, leaves, rtol, atol):
    """(status, detail) or None when there is nothing differentiable to compare."""
    tin = [tt for tt, g in leaves if tt.requires_grad and tt.dtype.is_floating_point]
    if not tin:
        return None
    proc = sample.output_process_fn_grad
    try:
        tproc = flatten_out(proc(tout))
    except Exception:
        return None
    touts = [(k, o) for k, o in enumerate(tproc)
             if isinstance(o, torch.Tensor) and o.dtype.is_floating_point and o.requires_grad]
    if not touts:
        return None
    loss = sum((o * torch.from_numpy(_weights(tuple(o.shape), k))).sum() for k, o in touts)
    try:
        tgrads = torch.autograd.grad(loss, tin, allow_unused=True)
    except Exception:
        return None
    try:
        gproc = flatten_out(proc(gout))
    except Exception:
        return None  # PyTorch's output post-processing does not run on graphc's outputs
    try:
        gloss = None
        for k, _ in touts:
            o = gproc[k]
            term = (o * gc.tensor(_weights(tuple(o.shape), k))).sum()
            gloss = term if gloss is None else gloss + term
        gloss.backward()
    except Exception as e:  # noqa: BLE001
        return REFUSED, reason(e)
    gin = [g for tt, g in leaves if tt.requires_grad and tt.dtype.is_floating_point]
    for k, (tg, g, tt) in enumerate(zip(tgrads, gin, tin)):
        e = np.zeros(tuple(tt.shape), np.float32) if tg is None else t_np(tg)
        a = np.zeros(tuple(tt.shape), np.float32) if g.grad is None else gc_np(g.grad)
        bad = close(a, e, rtol, atol)
        if bad:
            e64 = _grad64(sample, k)
            if e64 is None or close(a, e64, rtol, atol):
                return WRONG, f"d/d input {k}: {bad}"
    return PASS, ""


STATIC_OK = " [a static trace (no symbolic batch dim) compiles and matches]"


def _static_note(fn, arrays, tleaves, rtol, atol, sample_random):
    """Does the refusal come from gc.compile's symbolic batch dim? Trace with fixed shapes
    (as tests/test_ops.py does) and say whether that plan compiles and matches PyTorch."""
    from graphc.executor import Plan
    from graphc.tracing import trace_model
    try:
        graph, tracer = trace_model(fn, list(arrays), dynamic_batch=False)
        out = _seeded(lambda: Plan(graph, tracer.state_arrays).run(list(arrays)))
    except Exception as e:  # noqa: BLE001
        return f" [static trace too: {reason(e)[:60]}]"
    bad = compare_outputs([np.asarray(o) for o in flatten_out(out)], tleaves, rtol, atol, sample_random, compiled=True)
    return f" [static trace: {bad}]" if bad else STATIC_OK


def _to64(obj):
    if isinstance(obj, torch.Tensor):
        if obj.dtype == torch.float32:
            return obj.detach().double().requires_grad_(obj.requires_grad)
        return obj
    if isinstance(obj, tuple) and not isinstance(obj, torch.Size):
        return tuple(_to64(o) for o in obj)
    if isinstance(obj, list):
        return [_to64(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _to64(v) for k, v in obj.items()}
    return obj


def _arbitrate(op, args, kwargs, bad, compare64):
    """A float32 difference stands unless graphc matches PyTorch's float64 result on the same
    (upcast) inputs: then PyTorch's float32 value is the inaccurate one (ill-conditioned sample)."""
    try:
        t64 = flatten_out(_seeded(lambda: op.op(*_to64(args), **_to64(kwargs))))
    except Exception:
        return bad
    return bad if compare64(t64) else ""


def _grad64(sample, k):
    """PyTorch's float64 gradient for differentiable input k (same weights), as float32."""
    try:
        args = _to64((sample.input, *sample.args))
        kwargs = _to64(dict(sample.kwargs))
        leaves = []
        to_gc((args, kwargs), leaves)  # same traversal order as the float32 run
        tin = [tt for tt, _ in leaves if tt.requires_grad and tt.dtype.is_floating_point]
        out = flatten_out(sample.output_process_fn_grad(_seeded(lambda: _OP64[0](*args, **kwargs))))
        outs = [(i, o) for i, o in enumerate(out)
                if isinstance(o, torch.Tensor) and o.dtype.is_floating_point and o.requires_grad]
        loss = sum((o * torch.from_numpy(_weights(tuple(o.shape), i)).double()).sum() for i, o in outs)
        g = torch.autograd.grad(loss, tin, allow_unused=True)[k]
        return None if g is None else t_np(g).astype(np.float32)
    except Exception:
        return None


_OP64 = [None]


_ATTR = re.compile(r"^(?:module '(graphc[\w.]*)'|type object 'Tensor'|'Tensor' object) has no attribute '(\w+)'$")


def _missing_attr(e):
    """The graphc name an AttributeError says is absent (PyTorch's lambdas use graphc as torch)."""
    if not isinstance(e, AttributeError):
        return ""
    m = _ATTR.match(str(e))
    if not m:
        return ""
    where = m.group(1)
    return (where[len("graphc."):] + "." if where and where != "graphc" else "" if where else "Tensor.") + m.group(2)


def _clone(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, tuple) and not isinstance(obj, torch.Size):
        return tuple(_clone(o) for o in obj)
    if isinstance(obj, list):
        return [_clone(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    return obj


def _torch_random(op, args, kwargs) -> bool:
    """PyTorch's output moves with the RNG seed (PyTorch's sample lambdas reseed through
    ``wrapper_set_seed``: that helper is swapped for one with another seed)."""
    g = getattr(op.op, "__globals__", None)
    saved = g.get("wrapper_set_seed") if g else None
    try:
        first = [t.clone() if isinstance(t, torch.Tensor) else t
                 for t in flatten_out(_seeded(lambda: op.op(*_clone(args), **_clone(kwargs))))]
        if saved is not None:
            def reseeded(f, *a, **k):
                torch.manual_seed(1)
                return f(*a, **k)
            g["wrapper_set_seed"] = reseeded
        torch.manual_seed(1)
        again = flatten_out(op.op(*_clone(args), **_clone(kwargs)))
    except Exception:
        return False
    finally:
        if saved is not None:
            g["wrapper_set_seed"] = saved
    for a, b in zip(first, again):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.numel():
            if a.dtype.is_floating_point:
                if not torch.equal(torch.nan_to_num(a.detach(), 0.0), torch.nan_to_num(b.detach(), 0.0)):
                    return True
            elif not torch.equal(a, b):
                return True
    return False


# ---- the whole database --------------------------------------------------------------------

def run_all(entries=None):
    results = []
    for op in op_db if entries is None else entries:
        try:
            results.append(run_entry(op))
        except Exception as e:  # noqa: BLE001 - a sample generator failing is PyTorch's business
            r = Result(op)
            r.status, r.detail = NA, f"harness: {reason(e)}"
            results.append(r)
    return results


def summarize(results):
    by = collections.defaultdict(list)
    for r in results:
        by[r.status].append(r)
    fwd = [r for r in by[PASS]]
    full = [r for r in fwd if r.grad_status in (PASS, "n/a")]
    grad = [r for r in fwd if r.grad_status == PASS]
    s = {
        "entries": len(results),
        "applicable": len(results) - len(by[NA]),
        "forward_pass": len(fwd),
        "gradient_pass": len(grad),
        "full_pass": len(full),
        "missing": len(by[MISSING]),
        "refused": len(by[REFUSED]),
        "wrong": len(by[WRONG]),
        "torch_xfail": len(by[TORCH_XFAIL]),
        "not_applicable": len(by[NA]),
        "grad_refused": sum(r.grad_status == REFUSED for r in fwd),
        "compile_skipped_samples": sum(r.compile_skipped for r in results),
        "pass_values_unchecked_random": sum(r.values_unchecked for r in fwd),
        "refused_only_by_symbolic_batch": sum(r.detail.endswith(STATIC_OK) for r in by[REFUSED]),
    }
    return s, by


def report(results) -> str:
    s, by = summarize(results)
    lines = ["op_db through graphc: " + ", ".join(f"{k} {v}" for k, v in s.items())]
    for st in (WRONG, TORCH_XFAIL):
        lines.append(f"--- {st} ({len(by[st])})")
        lines += [f"  {r.id}: {r.detail}" for r in by[st]]
    reasons = collections.Counter(re.sub(r"^sample \d+ ", "", r.detail).split(" [")[0] for r in by[REFUSED])
    static = [r.id for r in by[REFUSED] if r.detail.endswith(STATIC_OK)]
    lines.append(f"--- REFUSED only by gc.compile's symbolic batch dim ({len(static)}): " + " ".join(static))
    lines.append(f"--- REFUSED ({len(by[REFUSED])}), by reason")
    lines += [f"  {n:4d}  {why}" for why, n in reasons.most_common()]
    lines.append("--- REFUSED entries")
    lines += [f"  {r.id}: {r.detail}" for r in by[REFUSED]]
    gref = [r for r in by[PASS] if r.grad_status == REFUSED]
    lines.append(f"--- forward PASS, gradient REFUSED ({len(gref)})")
    lines += [f"  {r.id}: {r.grad_detail}" for r in gref]
    miss = collections.Counter(r.missing for r in by[MISSING])
    lines.append(f"--- MISSING names ({len(miss)}), by entries each would unlock")
    lines += [f"  {n:3d}  {name}" for name, n in sorted(miss.items(), key=lambda kv: (-kv[1], kv[0]))]
    mo = sorted(r.id for r in by[MISSING] if r.method_only)
    lines.append(f"--- MISSING as a function but graphc.Tensor has the method ({len(mo)})")
    lines.append("  " + " ".join(mo))
    lines.append("--- PASS")
    lines.append("  " + " ".join(r.id + ("" if r.grad_status in (PASS, "n/a") else "(fwd)") for r in by[PASS]))
    return "\n".join(lines)


def select(patterns):
    """op_db entries whose name (or entry id) matches one of ``patterns`` (fnmatch: ``linalg.*``)."""
    import fnmatch
    return [op for op in op_db if any(fnmatch.fnmatchcase(op.name, p) or fnmatch.fnmatchcase(entry_id(op), p)
                                       for p in patterns)]


def as_json(results) -> dict:
    """The results as plain data: what the tests read back from a run in another process."""
    summary, _ = summarize(results)
    fields = ("id", "status", "grad_status", "detail", "grad_detail", "missing")
    return {"summary": summary, "report": report(results),
            "entries": [{f: getattr(r, f) for f in fields} for r in results]}


def main(argv) -> int:
    """``python tests/op_db_mapping.py [--max-samples N] [--json PATH] [NAME_PATTERN ...]``: the
    whole database or the matching entries; ``--json`` writes :func:`as_json` there instead of
    printing the report. The tests run it so, in a process of its own: importing ``op_db`` keeps
    hundreds of thousands of objects alive, which slows every later garbage collection of the
    test process (the plan-file tests time their refusals)."""
    import argparse
    import json
    import time

    parser = argparse.ArgumentParser()
    parser.add_argument("--max-samples", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("patterns", nargs="*")
    args = parser.parse_args(argv)
    global MAX_SAMPLES
    MAX_SAMPLES = args.max_samples
    t0 = time.time()
    res = run_all(select(args.patterns) if args.patterns else None)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(as_json(res), f)
    else:
        print(report(res))
        print(f"time {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
