"""A residual block (conv-BN-ReLU-conv-BN + skip) with AdaptiveAvgPool2d, trained on the
digits. Shows the fused conv+BN(+ReLU) nodes the default passes make.

Run: python examples/resnet_block.py [--epochs 3]
"""
import argparse
import collections

import numpy as np

import graphc as gc
from graphc import nn, optim
from graphc.data import DataLoader, datasets


class ResidualBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = self.bn1(self.conv1(x)).relu()
        out = self.bn2(self.conv2(out))
        return (out + x).relu()  # the skip connection: gradients of x are accumulated


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.block = ResidualBlock(16)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(self.pool(self.block(self.stem(x))).flatten(1))


def main(epochs: int = 3) -> float:
    gc.manual_seed(0)
    model = ResNet()
    loader = DataLoader(datasets.digits("train"), batch_size=64, shuffle=True, seed=0)
    xb, yb = next(iter(loader))
    step = gc.compile(model, (xb, yb), loss_fn=nn.CrossEntropyLoss(), optimizer=optim.AdamW(model.parameters(), 3e-3))
    ops = collections.Counter(n.op for n in step.graph.nodes)
    print("fused ops:", {op: ops[op] for op in ("conv_bn_train", "conv_bn_train_grad", "linear_relu") if ops[op]})
    for epoch in range(epochs):
        losses = [float(step(x, y)) for x, y in loader]
        print(f"epoch {epoch + 1}: loss {np.mean(losses):.4f}")
    images, labels = datasets.digits("test").arrays
    infer = gc.compile(model.eval(), (xb,))
    acc = float((infer(images).argmax(axis=1) == labels).mean())
    print(f"test accuracy: {acc:.3f}")
    return acc


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    main(parser.parse_args().epochs)
