"""Train a small CNN (conv+BN+ReLU blocks, pooling, dropout, linear head) on the digits with
SGD momentum and a cosine learning-rate schedule, all in one compiled plan.

Run: python examples/train_cnn_digits.py [--epochs 8]
"""
import argparse
import time

import numpy as np

import graphc as gc
from graphc import nn, optim
from graphc.data import DataLoader, datasets


def build_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.2), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10),
    )


def main(epochs: int = 8, batch_size: int = 64) -> float:
    gc.manual_seed(0)
    train, test = datasets.digits("train"), datasets.digits("test")
    model = build_model()
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    loader = DataLoader(train, batch_size=batch_size, shuffle=True, seed=0)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)

    xb, yb = next(iter(loader))
    start = time.perf_counter()
    step = gc.compile(model, example_inputs=(xb, yb), loss_fn=nn.CrossEntropyLoss(), optimizer=opt)
    print(f"compiled the training step in {time.perf_counter() - start:.2f} s: {len(step.graph.nodes)} nodes")
    for epoch in range(epochs):
        losses = [float(step(x, y)) for x, y in loader]
        sched.step()  # changes the plan's lr input; no recompiling
        print(f"epoch {epoch + 1}: loss {np.mean(losses):.4f}  lr {opt.param_groups[0]['lr']:.4f}")
    infer = gc.compile(model.eval(), example_inputs=(xb,))
    images, labels = test.arrays
    acc = float((infer(images).argmax(axis=1) == labels).mean())
    print(f"test accuracy: {acc:.3f}  ({time.perf_counter() - start:.1f} s)")
    return acc


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=8)
    main(parser.parse_args().epochs)
