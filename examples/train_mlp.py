"""Train a 64-128-10 MLP on the bundled digits with one compiled training plan.

Run: python examples/train_mlp.py [--epochs 20]
"""
import argparse
import time

import numpy as np

import graphc as gc
from graphc import nn, optim
from graphc.data import DataLoader, datasets


def accuracy(plan, dataset) -> float:
    images, labels = dataset.arrays
    logits = plan(images.reshape(len(images), -1))
    return float((logits.argmax(axis=1) == labels).mean())


def main(epochs: int = 20, batch_size: int = 32) -> float:
    gc.manual_seed(0)
    train, test = datasets.digits("train"), datasets.digits("test")
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(train, batch_size=batch_size, shuffle=True, seed=0)

    xb, yb = next(iter(loader))
    step = gc.compile(model, example_inputs=(xb.reshape(len(xb), -1), yb),
                      loss_fn=nn.CrossEntropyLoss(), optimizer=opt)
    start = time.perf_counter()
    for epoch in range(epochs):
        losses = [float(step(x.reshape(len(x), -1), y)) for x, y in loader]  # last batch is smaller: no retrace
        if epoch % 5 == 4 or epoch == epochs - 1:
            print(f"epoch {epoch + 1:>2}: loss {np.mean(losses):.4f}")
    infer = gc.compile(model.eval(), example_inputs=(xb.reshape(len(xb), -1),))  # sees the trained weights
    acc = accuracy(infer, test)
    print(f"test accuracy: {acc:.3f}  ({time.perf_counter() - start:.1f} s of training)")
    return acc


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=20)
    main(parser.parse_args().epochs)
