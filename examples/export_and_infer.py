"""Export a trained model to one plan file, then run it with no model code.

Run: python examples/export_and_infer.py [--plan model.graphc]

Without --plan it first trains a small MLP on the digits and exports it; the inference part
below needs only `graphc` and numpy: `gc.load` rebuilds the plan from the file alone.
"""
import argparse
import os
import tempfile

import numpy as np

import graphc as gc
from graphc.data import datasets


def train_and_export(path: str) -> None:
    from graphc import nn, optim
    from graphc.data import DataLoader

    gc.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 10))
    loader = DataLoader(datasets.digits("train"), batch_size=64, shuffle=True, seed=0)
    xb, yb = next(iter(loader))
    step = gc.compile(model, (xb, yb), loss_fn=nn.CrossEntropyLoss(), optimizer=optim.Adam(model.parameters(), 3e-3))
    for _ in range(5):
        for x, y in loader:
            step(x, y)
    gc.export(model, (xb,), path)  # eval mode, BatchNorm folded into the Linear, weights frozen
    print(f"exported {path} ({os.path.getsize(path)} bytes)")


def infer(path: str) -> float:
    plan = gc.load(path)  # no model code: the graph and weights come from the file
    print(f"loaded a {plan.kind} plan: inputs {plan.input_names}, {len(plan.graph.nodes)} nodes")
    images, labels = datasets.digits("test").arrays
    logits = plan(images)
    acc = float((np.argmax(logits, axis=1) == labels).mean())
    print(f"test accuracy: {acc:.3f}")
    return acc


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--plan", help="an exported .graphc file (default: train and export one first)")
    args = parser.parse_args()
    if args.plan:
        infer(args.plan)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "digits-mlp.graphc")
            train_and_export(path)
            infer(path)
