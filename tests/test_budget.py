"""The memory budget: byte counts in Python integers from static shapes, checked before any
allocation, so huge or wrapping sizes are refused with a GraphcError naming the node."""
from __future__ import annotations

import re
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

import graphc as gc
from graphc import nn
from graphc.executor import Plan
from graphc.executor.budget import DEFAULT_FRACTION, host_memory, physical_memory, value_bytes
from graphc.ir import Builder, DType, Graph, TensorType, Value

X1 = np.ones((1, 1), np.float32)


def bomb(op: str, shape) -> Graph:
    """x:[N,1] -> a huge intermediate -> its sum (a scalar: the output itself is tiny)."""
    g = Graph("bomb")
    b = Builder(g, meta={"module": "head", "module_type": "Bomb", "source": "net.py:7"})
    x = g.add_input(Value("x", TensorType(("N", 1), DType.float32)))
    if op == "full":
        big = b.emit1("full", [], {"shape": shape, "value": 0.0})
    else:
        big = b.emit1("broadcast_to", [x], {"shape": shape})
    g.outputs = [b.emit1("sum", [big])]
    return g


def test_value_bytes_never_wraps():
    assert value_bytes(TensorType((2**32, 2**32), DType.float32)) == 2**66  # np.prod(int64) gives 0


@pytest.mark.parametrize("shape, size", [((2**32, 2**32), "65536.00 PiB"), ((2**20, 2**20), "4.00 TiB")])
def test_huge_intermediates_are_refused_naming_the_node_before_allocating(shape, size):
    plan = Plan(bomb("full", shape), {})
    tracemalloc.start()
    try:
        with pytest.raises(gc.GraphcError, match=rf"full output %\d+ f32\[{shape[0]},{shape[1]}\] needs {size}"
                                                 r".*memory budget.*\[head \(Bomb\) at net\.py:7\]"):
            plan(X1)
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()


def test_budget_is_a_parameter_and_checked_at_each_batch_size():
    plan = Plan(bomb("broadcast", ("N", 36000)), {}, memory_budget=1 << 30)  # 36000 x 36000 f32 = 4.8 GiB
    assert float(plan(np.ones((4, 1), np.float32))) == 4 * 36000
    with pytest.raises(gc.GraphcError, match=r"broadcast_to output .* needs 4\.83 GiB .* at batch size 36000"):
        plan(np.ones((36000, 1), np.float32))


def test_arena_over_budget_is_refused_naming_its_largest_buffer():
    gc.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh()).eval()
    plan = gc.compile(model, (np.zeros((2, 256), np.float32),), memory_budget=300_000)
    plan(np.zeros((64, 256), np.float32))  # 64 KiB values, a small arena
    with pytest.raises(gc.GraphcError, match=r"the activation arena \(largest buffer: \w+ output f32\[256,256\]\)"):
        plan(np.zeros((256, 256), np.float32))  # each value 256 KiB: two live at once exceed 300 KB


def test_default_budget_is_half_the_machine(tmp_path):
    plan = gc.compile(nn.Linear(2, 2).eval(), (np.zeros((1, 2), np.float32),))
    assert plan.memory_budget == int(host_memory() * DEFAULT_FRACTION) <= int(physical_memory() * DEFAULT_FRACTION)
    plan.save(tmp_path / "p.graphc")
    assert gc.load(tmp_path / "p.graphc", memory_budget=1234).memory_budget == 1234


@pytest.mark.parametrize("bad", [0, -1, 1.5, "1G", True])
def test_bad_budget_values_are_refused(bad):
    with pytest.raises(gc.GraphcError, match="memory_budget must be a positive number of bytes"):
        gc.compile(nn.Linear(2, 2).eval(), (np.zeros((1, 2), np.float32),), memory_budget=bad)


def test_hostile_file_loads_small_and_is_refused_when_run_and_inspected(tmp_path):
    path = tmp_path / "bomb.graphc"
    Plan(bomb("full", (2**20, 2**20)), {}).save(path)
    assert path.stat().st_size < 1000
    plan = gc.load(path)
    with pytest.raises(gc.GraphcError, match="needs 4.00 TiB"):
        plan(X1)
    done = subprocess.run([sys.executable, "-m", "graphc", "inspect", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "activation arena: not planned at batch 1 (full output" in done.stdout
    assert "needs 4.00 TiB" in done.stdout


def test_memory_report_plans_without_allocating_the_arena():
    gc.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 512), nn.Tanh(), nn.Linear(512, 512), nn.Tanh()).eval()
    plan = gc.compile(model, (np.zeros((2, 512), np.float32),))
    tracemalloc.start()
    try:
        report = plan.memory_report(batch=4096)  # an 8 MiB arena, never allocated
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.arena_bytes >= 4096 * 512 * 4 and peak < report.arena_bytes // 4
    assert not plan._programs  # nothing cached: the next real call builds and allocates its own


# A plan whose one arena buffer (relu's output, 512 MiB at batch 1) cannot fit in the room that
# RLIMIT_AS leaves, lowered in the child to what it has mapped plus 256 MiB once graphc is imported.
LIMITED_CHILD = """
import resource, sys
import numpy as np
import graphc as gc
from graphc.executor import Plan
from graphc.executor.memory_limits import status_kib
from graphc.ir import Builder, DType, Graph, TensorType, Value
g = Graph("big")
b = Builder(g, meta={"module": "head", "module_type": "Big", "source": "net.py:9"})
x = g.add_input(Value("x", TensorType(("N", 1), DType.float32)))
wide = b.emit1("broadcast_to", [x], {"shape": ("N", 1 << 27)})  # a view: never allocated
g.outputs = [b.emit1("sum", [b.emit1("relu", [wide])])]
with open("/proc/self/status") as f:
    mapped = status_kib(f.read(), "VmSize") * 1024
resource.setrlimit(resource.RLIMIT_AS, (mapped + (256 << 20), resource.RLIM_INFINITY))
budget = None if sys.argv[1] == "default" else 1 << 40
plan = Plan(g, {}, memory_budget=budget)
if budget is None:
    assert 100 << 20 < plan.memory_budget <= 128 << 20, plan.memory_budget  # half the room left
try:
    plan(np.ones((1, 1), np.float32))
except gc.GraphcError as e:
    print("GraphcError:", e)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc/self/status are Linux's")
@pytest.mark.parametrize("budget, message", [
    ("default", r"broadcast_to output %0 f32\[N,134217728\] needs 512\.00 MiB \(536,870,912 bytes\) at batch "
                r"size 1, over the plan's memory budget of 1\d\d\.\d\d MiB"),
    ("1 TiB", r"the activation arena \(largest buffer: relu output f32\[1,134217728\]\) needs 512\.00 MiB "
              r"\(536,870,912 bytes\) at batch size 1, more than this process could allocate")])
def test_a_lowered_address_space_limit_is_refused_with_graphcs_error(budget, message):
    """Under ``ulimit -v`` the default budget is half the room left under RLIMIT_AS, so the
    plan is refused before allocating; with a budget given larger than that room, the failed
    allocation is still graphc's error naming the node and the bytes, not numpy's MemoryError."""
    done = subprocess.run([sys.executable, "-c", LIMITED_CHILD, budget], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(message + r".*\[head \(Big\) at net\.py:9\]", done.stdout), done.stdout
