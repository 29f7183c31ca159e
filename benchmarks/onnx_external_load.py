"""``gc.load`` of an ONNX model whose weights lie in ``model.onnx.data`` (external data, as
``torch.onnx.export`` writes them) next to the same model with its weights inside the file.

Run: .venv/bin/python benchmarks/onnx_external_load.py [--layers 4] [--width 2048] [--rounds 3]

The model is ``layers`` Linear(width, width) + ReLU layers built with onnx.helper (float32, so
4 * width**2 bytes per layer). For each layout it prints the median ``gc.load`` time over
rounds and the peak of Python-tracked allocations during one load (tracemalloc: numpy arrays
are counted; protobuf's C++ parse is not). Not a test: the numbers depend on the machine and
on what else runs on it.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import tracemalloc

import numpy as np
import onnx
from onnx import helper, numpy_helper

import graphc as gc


def build(layers: int, width: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes, inits, last = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(np.zeros(width, np.float32), f"b{i}")]
        nodes += [helper.make_node("Gemm", [last, f"w{i}", f"b{i}"], [f"h{i}"], transB=1),
                  helper.make_node("Relu", [f"h{i}"], [f"r{i}"])]
        last = f"r{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", width])],
                              [helper.make_tensor_value_info(last, onnx.TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def measure(path: str, rounds: int) -> tuple:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        gc.load(path)
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    gc.load(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    model = build(args.layers, args.width)
    weights = args.layers * args.width ** 2 * 4
    with tempfile.TemporaryDirectory() as tmp:
        inline, external = os.path.join(tmp, "inline.onnx"), os.path.join(tmp, "external", "model.onnx")
        os.makedirs(os.path.dirname(external))
        onnx.save(model, inline)
        onnx.save(model, external, save_as_external_data=True, location="model.onnx.data")
        print(f"{args.layers} x Linear({args.width}, {args.width}): {weights / 2**20:.0f} MiB of float32 weights")
        for name, path in (("inside the .onnx file", inline), ("in model.onnx.data", external)):
            seconds, peak = measure(path, args.rounds)
            print(f"  weights {name:22s} gc.load {seconds * 1000:8.1f} ms   traced peak {peak / 2**20:7.1f} MiB")


if __name__ == "__main__":
    main()
