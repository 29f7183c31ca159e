"""Device selection (CPU-side, always run) and the cupy backend (marked gpu: they skip
cleanly where cupy or a CUDA device is missing)."""
import sys
import types

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.executor.backends import get_backend, parse_device
from graphc.executor.backends import cupy_backend as cupy_module
from graphc.executor.kernels import TABLE
from graphc.ir import REGISTRY
from op_table import OP_INFO

try:
    get_backend("cuda")
    HAVE_CUDA = True
except gc.DeviceError as e:
    HAVE_CUDA, WHY = False, str(e)
requires_cuda = pytest.mark.skipif(not HAVE_CUDA, reason=f"GPU test: {WHY}" if not HAVE_CUDA else "")


def tiny_cnn():
    gc.manual_seed(0)
    # no conv bias before BatchNorm: its gradient is rounding noise, which Adam's normalised step
    # turns into updates of size lr whose sign differs between devices
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Dropout(0.2), nn.Linear(64, 3))


def data(n=8):
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, 1, 8, 8)).astype(np.float32), rng.integers(0, 3, n)


# ---- CPU-side: device names and errors ---------------------------------------------------------
@pytest.mark.parametrize("name,expected", [("cpu", ("cpu", 0)), ("CUDA", ("cuda", 0)), ("cuda:1", ("cuda", 1))])
def test_device_names_parse(name, expected):
    assert parse_device(name) == expected


@pytest.mark.parametrize("name", ["tpu", "cuda:x", "cpu:1", "gpu", "cuda:-1"])
def test_unknown_device_names_are_refused(name):
    with pytest.raises(gc.DeviceError, match="unknown device"):
        get_backend(name)


def _fake_cupy(monkeypatch, count=None, error=None):
    runtime = types.SimpleNamespace(getDeviceCount=(lambda: count) if error is None else _raiser(error))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime)))
    monkeypatch.setattr(cupy_module, "_BACKENDS", {})


def _raiser(error):
    def raise_():
        raise error
    return raise_


def test_cuda_without_cupy_says_cupy_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    x, y = data()
    for attempt in (lambda: get_backend("cuda"), lambda: gc.tensor(x).to("cuda"),
                    lambda: gc.compile(tiny_cnn().eval(), (x,), device="cuda")):
        with pytest.raises(gc.DeviceError, match="needs cupy"):
            attempt()


def test_cuda_without_a_device_says_so(monkeypatch):
    _fake_cupy(monkeypatch, error=RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected"))
    with pytest.raises(gc.DeviceError, match="no CUDA device is usable"):
        get_backend("cuda")


def test_cuda_index_beyond_the_devices_says_how_many(monkeypatch):
    _fake_cupy(monkeypatch, count=1)
    with pytest.raises(gc.DeviceError, match="cuda:3 requested but only 1"):
        get_backend("cuda:3")


def test_loading_on_a_missing_device_is_a_device_error(tmp_path, monkeypatch):
    x, _ = data()
    path = tmp_path / "m.graphc"
    gc.export(tiny_cnn(), (x,), path)
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(gc.DeviceError, match="needs cupy"):
        gc.load(path, device="cuda")
    assert gc.load(path, device="cpu")(x).shape == (8, 3)


def test_cupy_overrides_are_registry_ops():
    assert set(cupy_module._FUSED) <= set(REGISTRY) == set(TABLE)


def test_compare_backends_agrees_with_itself_and_finds_a_broken_kernel():
    x, y = data()
    model = tiny_cnn()
    step = gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=optim.SGD(model.parameters(), lr=0.1))
    before = {k: v.copy() for k, v in step.state_dict().items()}
    report = gc.debug.compare_backends(step, [x, y], devices=("cpu", "cpu"))
    assert report.first_mismatch is None and report.nodes_checked == len(step.graph.nodes)
    for k, v in step.state_dict().items():  # the plan itself is untouched
        np.testing.assert_array_equal(v, before[k])
    cpu = get_backend("cpu")
    broken = type(cpu)("broken", np, dict(cpu.kernels))
    broken.kernels["max_pool2d_grad"] = lambda spec: (lambda *a, out=None: cpu.kernels["max_pool2d_grad"](spec)(*a) * 1.5)
    report = gc.debug.compare_backends(step, [x, y], devices=(cpu, broken))
    assert report.first_mismatch is not None and report.first_mismatch.op == "max_pool2d_grad"
    assert "max_pool2d_grad" in str(report)


# ---- GPU: same plans on cupy --------------------------------------------------------------------
GPU_CASES = [(op, s) for op, info in sorted(OP_INFO.items()) for s in info.samples if s.ref is not None]


@pytest.mark.gpu
@requires_cuda
def test_cupy_kernel_table_matches_the_registry():
    assert set(get_backend("cuda").kernels) == set(REGISTRY)


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("op,sample", GPU_CASES, ids=[f"{op}-{s.desc}" for op, s in GPU_CASES])
def test_op_table_on_cupy_matches_numpy(op, sample):
    from graphc.executor.kernels import KernelSpec
    from graphc.ir.registry import infer_types
    from graphc.ir.types import DType, TensorType

    opdef = REGISTRY[op]
    attrs = opdef.normalize_attrs(sample.attrs)
    in_types = [TensorType(a.shape, DType.from_any(a.dtype)) for a in sample.inputs]
    spec = KernelSpec(attrs, tuple(in_types), tuple(infer_types(opdef, in_types, attrs)), np.random.default_rng(0))
    cpu, gpu = get_backend("cpu"), get_backend("cuda")
    expected = cpu.kernels[op](spec)(*sample.inputs)
    got = gpu.kernels[op](spec)(*[gpu.asarray(a) for a in sample.inputs])
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(gpu.to_numpy(g), np.asarray(e), rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@requires_cuda
def test_training_on_cupy_matches_numpy_and_files_cross_devices(tmp_path):
    x, y = data(16)
    results = {}
    for device in ("cpu", "cuda"):
        model = tiny_cnn()
        step = gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(),
                          optimizer=optim.Adam(model.parameters(), 1e-2), device=device)
        losses = [float(step(x, y)) for _ in range(5)]
        results[device] = (losses, {k: step.backend.to_numpy(v) for k, v in step.state_dict().items()}, step)
    np.testing.assert_allclose(results["cuda"][0], results["cpu"][0], rtol=1e-4)
    for k, v in results["cpu"][1].items():
        np.testing.assert_allclose(results["cuda"][1][k], v, rtol=1e-4, atol=1e-5, err_msg=k)
    results["cuda"][2].save(tmp_path / "gpu.graphc")
    on_cpu = gc.load(tmp_path / "gpu.graphc", device="cpu")
    results["cpu"][2].save(tmp_path / "cpu.graphc")
    on_gpu = gc.load(tmp_path / "cpu.graphc", device="cuda")
    np.testing.assert_allclose(float(on_cpu(x, y)), float(on_gpu(x, y)), rtol=1e-4)
    print(gc.debug.compare_backends(on_cpu, [x, y]))
