"""The sub-pixel convolution super-resolution network of pytorch/examples'
``super_resolution`` (Shi et al. 2016), with fewer channels: four convolutions and a
``PixelShuffle`` that rearranges ``upscale_factor ** 2`` channels into an image that many
times larger, orthogonal initialisation scaled by ReLU's gain, MSELoss, Adam, and the
example's PSNR evaluation.

Plain PyTorch: tests/test_generative_model_files.py runs this text unchanged with PyTorch and
with another library bound to ``torch``, ``nn`` and ``optim``.
"""
import math

import torch
import torch.nn as nn
import torch.optim as optim


class Net(nn.Module):
    def __init__(self, upscale_factor, channels=16):
        super(Net, self).__init__()

        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, channels, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(channels, channels, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(channels, channels // 2, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(channels // 2, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)

        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        x = self.pixel_shuffle(self.conv4(x))
        return x

    def _initialize_weights(self):
        nn.init.orthogonal_(self.conv1.weight, nn.init.calculate_gain('relu'))
        nn.init.orthogonal_(self.conv2.weight, nn.init.calculate_gain('relu'))
        nn.init.orthogonal_(self.conv3.weight, nn.init.calculate_gain('relu'))
        nn.init.orthogonal_(self.conv4.weight)


def make_optimizer(model, lr=0.01):
    return optim.Adam(model.parameters(), lr=lr)


def make_train_step(model, optimizer):
    """One iteration of the example's ``train(epoch)`` loop."""
    criterion = nn.MSELoss()

    def train_step(input, target):
        optimizer.zero_grad()
        loss = criterion(model(input), target)
        loss.backward()
        optimizer.step()
        return loss

    return train_step


def test(model, batches):
    """The example's ``test()``: the average PSNR over the batches."""
    criterion = nn.MSELoss()
    avg_psnr = 0
    with torch.no_grad():
        for input, target in batches:
            prediction = model(input)
            mse = criterion(prediction, target)
            psnr = 10 * math.log10(1 / mse.item())
            avg_psnr += psnr
    return avg_psnr / len(batches)
