"""The measuring side of ``graphc bench``: timing, interleaved A/B rows, which BLAS numpy
runs on, the W2 profile and the onnxruntime hook. The workloads (models, data, steps) are
in graphc/apps/bench.py, which counts as user code for the tracer's source lines."""
from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import statistics
import time

import numpy as np

NAME_WIDTH = 36


def timed(fn, steps: int) -> float:
    """Median seconds per call over ``steps`` calls."""
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_ms(fns: dict, rounds: int, calls: int) -> dict:
    """Median ms per call of each fn in ``fns``, timed in interleaved rounds of ``calls`` calls
    (so drifts of a shared machine hit every side alike), after a warm-up of 3 calls or 0.3 s."""
    for fn in fns.values():
        start = time.perf_counter()
        for i in range(100):
            fn()
            if i >= 2 and time.perf_counter() - start > 0.3:
                break
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - start) / calls)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def ab(name: str, ours, theirs, steps: int, rounds: int, peer: str = "torch", first_s: float | None = None) -> None:
    """One row: graphc (``ours``) and its peer (``theirs``, or None; PyTorch unless ``peer``
    says otherwise) in interleaved rounds of ``steps`` calls; the median round of each and
    their ratio graphc / peer. ``first_s``: graphc's warm-up, in seconds (its first calls up
    to the one that compiles the loops), printed at the end of the row; loops an earlier row
    compiled are reused (one process)."""
    for f in (ours, theirs):
        if f is not None:
            f()  # warm-up: programs, buffers, caches
    a, b = [], []
    for _ in range(rounds):  # interleaved so drifts hit both sides alike
        a.append(timed(ours, steps))
        if theirs is not None:
            b.append(timed(theirs, steps))
    ga = statistics.median(a) * 1e3
    if b:
        tb = statistics.median(b) * 1e3
        row = f"{name:<{NAME_WIDTH}} graphc {ga:8.3f} ms   {peer:>11} {tb:8.3f} ms   ratio {ga / tb:5.2f}"
    else:
        row = f"{name:<{NAME_WIDTH}} graphc {ga:8.3f} ms"
    print(row + (f"   warm-up {first_s:6.2f} s" if first_s is not None else ""), flush=True)


# ---- which BLAS numpy runs on ----------------------------------------------------------------------
def _build_blas() -> str | None:
    """numpy's build-time BLAS: 'scipy-openblas 0.3.31.188.0'."""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return " ".join(str(blas[k]) for k in ("name", "version") if blas.get(k)) or None
    except Exception:  # noqa: BLE001 - older numpy, other builds: the line just says less
        return None


def _threadpoolctl_blas() -> str | None:
    """'OpenBLAS, SkylakeX kernels, 2 threads' for the BLAS numpy loaded (threadpoolctl's view)."""
    if importlib.util.find_spec("threadpoolctl") is None:  # optional, not a dependency
        return None
    try:
        from threadpoolctl import threadpool_info

        numpy_dir = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
        blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        mine = [i for i in blas if i.get("filepath", "").startswith(numpy_dir) and "numpy" in i["filepath"]]
        info = (mine or blas or [None])[0]
        if info is None:
            return None
        kernels = f", {info['architecture']} kernels" if info.get("architecture") else ""
        return f"{info.get('internal_api', 'BLAS')}{kernels}, {info.get('num_threads')} threads"
    except Exception:  # noqa: BLE001 - a report line must never stop the benchmark
        return None


def _ctypes_openblas() -> str | None:
    """OpenBLAS's core type from the library itself: ``*openblas_get_corename*`` by ctypes."""
    try:
        paths = []
        if os.path.exists("/proc/self/maps"):  # Linux: the libraries this process loaded
            with open("/proc/self/maps") as maps:
                paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line})
        numpy_libs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(np.__file__))), "numpy.libs")
        paths = paths or glob.glob(os.path.join(numpy_libs, "*openblas*"))
        for path in paths:
            lib = ctypes.CDLL(path)
            for prefix, suffix in (("scipy_", "64_"), ("scipy_", ""), ("", "64_"), ("", "")):
                corename = getattr(lib, f"{prefix}openblas_get_corename{suffix}", None)
                if corename is not None:
                    corename.restype = ctypes.c_char_p
                    threads = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
                    n = f", {threads()} threads" if threads is not None else ""
                    return f"openblas, {corename().decode()} kernels{n}"
    except Exception:  # noqa: BLE001 - a report line must never stop the benchmark
        return None
    return None


def blas_line() -> str:
    """'numpy BLAS: scipy-openblas 0.3.31.188.0 (openblas, SkylakeX kernels, 2 threads)'.
    Whatever cannot be found out is left out; it never raises."""
    built = _build_blas() or "unknown"
    runtime = _threadpoolctl_blas() or _ctypes_openblas()
    return f"numpy BLAS: {built}" + (f" ({runtime})" if runtime else "")


# ---- the W2 profile ----------------------------------------------------------------------------------
def print_profile(step, x, y, steps: int = 10, limit: int = 12) -> None:
    """``gc.debug.profile`` of a train step: the per-op table and the ``limit`` slowest nodes."""
    from .. import debug

    profile = getattr(debug, "profile", None)
    if profile is None:
        print("profile: gc.debug.profile is not available in this graphc")
        return
    print(profile(step, x, y, steps=steps).table(limit=limit), flush=True)


# ---- onnxruntime -------------------------------------------------------------------------------------
def ort_pair(model, x):
    """The onnxruntime side of an inference row: ``model`` exported by graphc itself
    (``gc.export(model, (x,), "m.onnx")``: BN folded, fusions written back as standard ops) and
    run by onnxruntime on ``x``; None when onnx or onnxruntime is missing."""
    if ort_status():
        return None
    import tempfile

    import onnxruntime

    from ..compile import export

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        export(model, (x,), path)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = os.cpu_count() or 1  # as many threads as numpy's BLAS
        session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, {"x": x})


def ort_status() -> str:
    """Why the onnxruntime rows are missing, or '' when they can run."""
    missing = [m for m in ("onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
    if not missing:
        return ""
    return f"onnxruntime rows skipped: {', '.join(missing)} not installed (pip install {' '.join(missing)})"
