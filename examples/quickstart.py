"""graphc quickstart: build a small CNN, look at its traced IR, compile it, compare with eager.

Run: python examples/quickstart.py   (or: make demo)
"""
import numpy as np

import graphc as gc
from graphc import nn

gc.manual_seed(0)

model = nn.Sequential(
    nn.Conv2d(1, 8, kernel_size=3, padding=1),
    nn.BatchNorm2d(8),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(8, 16, kernel_size=3, padding=1),
    nn.BatchNorm2d(16),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Flatten(),
    nn.Linear(16 * 2 * 2, 10),
)
model.eval()  # inference: BatchNorm uses its running statistics

rng = np.random.default_rng(0)
x64 = rng.standard_normal((64, 1, 8, 8)).astype(np.float32)

print("== traced IR (one node per line: type, op, attrs, inputs, module path, source line) ==")
print(gc.jit.trace(model, x64))

plan = gc.compile(model, example_inputs=(x64,))
print(f"\n== compiled: {plan} ==")

for batch in (64, 5):
    x = x64[:batch]
    compiled = plan(x)
    eager = model(gc.tensor(x)).numpy()
    diff = float(np.abs(compiled - eager).max())
    print(f"batch {batch:>2}: output {compiled.shape}, max |compiled - eager| = {diff:.3g}")
    assert diff <= 1e-5, "compiled plan disagrees with eager execution"

print("\nThe same plan ran batch 64 and batch 5 without retracing (the batch dim is the symbol N).")
