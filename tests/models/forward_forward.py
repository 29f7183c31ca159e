"""Hinton's forward-forward algorithm in the style of mohammadpz/pytorch_forward_forward
(``main.py``): the label written over the first 10 pixels by ``overlay_y_on_x``
(``x_[:, :10] *= 0.0``, ``x_[range(x.shape[0]), y] = x.max()``), ``Layer(nn.Linear)`` with its
own Adam, inputs normalised by ``x.norm(2, 1, keepdim=True)``, ``torch.mm(x_direction,
self.weight.T)``, goodness ``.pow(2).mean(1)``, the softplus-style loss
``torch.log(1 + torch.exp(torch.cat([...])))``, layers trained one after the other on detached
outputs, and ``predict`` by the label of highest total goodness.

Negative data: ``x_neg = overlay_y_on_x(x, y[rnd])`` with ``rnd = torch.randperm(x.size(0))``
(the repository's), or wrong labels drawn by ``torch.randint`` (``make_negative_labels``).
The data (torchvision's MNIST in the repository) is given by the caller.

Plain PyTorch: tests/test_issue34_model_files.py runs this text unchanged with PyTorch and
with another library bound to ``torch``.
"""
import torch
import torch.nn as nn
from torch.optim import Adam


def overlay_y_on_x(x, y):
    """Replace the first 10 pixels of data [x] with one-hot-encoded label [y]
    """
    x_ = x.clone()
    x_[:, :10] *= 0.0
    x_[range(x.shape[0]), y] = x.max()
    return x_


class Net(torch.nn.Module):

    def __init__(self, dims, num_epochs=1000):
        super().__init__()
        self.layers = []
        for d in range(len(dims) - 1):
            self.layers += [Layer(dims[d], dims[d + 1], num_epochs=num_epochs)]

    def predict(self, x):
        goodness_per_label = []
        for label in range(10):
            h = overlay_y_on_x(x, label)
            goodness = []
            for layer in self.layers:
                h = layer(h)
                goodness += [h.pow(2).mean(1)]
            goodness_per_label += [sum(goodness).unsqueeze(1)]
        goodness_per_label = torch.cat(goodness_per_label, 1)
        return goodness_per_label.argmax(1)

    def train(self, x_pos, x_neg):
        h_pos, h_neg = x_pos, x_neg
        for i, layer in enumerate(self.layers):
            h_pos, h_neg = layer.train(h_pos, h_neg)


class Layer(nn.Linear):
    def __init__(self, in_features, out_features,
                 bias=True, device=None, dtype=None, num_epochs=1000):
        super().__init__(in_features, out_features, bias, device, dtype)
        self.relu = torch.nn.ReLU()
        self.opt = Adam(self.parameters(), lr=0.03)
        self.threshold = 2.0
        self.num_epochs = num_epochs

    def forward(self, x):
        x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return self.relu(
            torch.mm(x_direction, self.weight.T) +
            self.bias.unsqueeze(0))

    def train_step(self, x_pos, x_neg):
        """One iteration of ``train``'s epoch loop (the repository writes it inline)."""
        g_pos = self.forward(x_pos).pow(2).mean(1)
        g_neg = self.forward(x_neg).pow(2).mean(1)
        # The following loss pushes pos (neg) samples to
        # values larger (smaller) than the self.threshold.
        loss = torch.log(1 + torch.exp(torch.cat([
            -g_pos + self.threshold,
            g_neg - self.threshold]))).mean()
        self.opt.zero_grad()
        # this backward just compute the derivative and hence
        # is not considered backpropagation.
        loss.backward()
        self.opt.step()
        return loss

    def train(self, x_pos, x_neg):
        for i in range(self.num_epochs):
            self.train_step(x_pos, x_neg)
        return self.forward(x_pos).detach(), self.forward(x_neg).detach()


def make_negative(x, y):
    """The repository's negative data: the labels of a random permutation of the batch."""
    rnd = torch.randperm(x.size(0))
    return overlay_y_on_x(x, y[rnd])


def make_negative_labels(y):
    """Wrong labels for every sample: the true one shifted by 1..9 (``torch.randint``)."""
    return torch.remainder(y + torch.randint(1, 10, y.shape), 10)


def error(net, x, y):
    return 1.0 - net.predict(x).eq(y).float().mean().item()
