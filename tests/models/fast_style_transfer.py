"""Fast neural style transfer in the style of pytorch/examples' ``fast_neural_style``
(Johnson et al. 2016), made small: the image transformation network (reflection-padded
convolutions, InstanceNorm with affine parameters, residual blocks, nearest-neighbour upsampling
followed by a convolution) trained against a frozen VGG-style feature extractor with the
example's perceptual loss: a content term (MSE of one feature map) plus a style term (MSE of
Gram matrices computed with ``bmm``), and a total-variation term; Adam.

Plain PyTorch: tests/test_generative_model_files.py runs this text unchanged with PyTorch and
with another library bound to ``torch``, ``nn``, ``F`` and ``optim``.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class ConvLayer(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super(ConvLayer, self).__init__()
        reflection_padding = kernel_size // 2
        self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        out = self.reflection_pad(x)
        out = self.conv2d(out)
        return out


class ResidualBlock(torch.nn.Module):
    """introduced in https://arxiv.org/abs/1512.03385, with InstanceNorm in place of BatchNorm"""

    def __init__(self, channels):
        super(ResidualBlock, self).__init__()
        self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in2 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        residual = x
        out = self.relu(self.in1(self.conv1(x)))
        out = self.in2(self.conv2(out))
        out = out + residual
        return out


class UpsampleConvLayer(torch.nn.Module):
    """Upsamples the input and then does a convolution (no checkerboard artifacts, unlike
    ConvTranspose2d; see http://distill.pub/2016/deconv-checkerboard/)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
        super(UpsampleConvLayer, self).__init__()
        self.upsample = upsample
        reflection_padding = kernel_size // 2
        self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        x_in = x
        if self.upsample:
            x_in = F.interpolate(x_in, mode='nearest', scale_factor=self.upsample)
        out = self.reflection_pad(x_in)
        out = self.conv2d(out)
        return out


class TransformerNet(torch.nn.Module):
    def __init__(self, width=8, num_residual=2):
        super(TransformerNet, self).__init__()
        # Initial convolution layers
        self.conv1 = ConvLayer(3, width, kernel_size=5, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(width, affine=True)
        self.conv2 = ConvLayer(width, width * 2, kernel_size=3, stride=2)
        self.in2 = torch.nn.InstanceNorm2d(width * 2, affine=True)
        self.conv3 = ConvLayer(width * 2, width * 2, kernel_size=3, stride=2)
        self.in3 = torch.nn.InstanceNorm2d(width * 2, affine=True)
        # Residual layers
        self.res = torch.nn.Sequential(*[ResidualBlock(width * 2) for _ in range(num_residual)])
        # Upsampling Layers
        self.deconv1 = UpsampleConvLayer(width * 2, width * 2, kernel_size=3, stride=1, upsample=2)
        self.in4 = torch.nn.InstanceNorm2d(width * 2, affine=True)
        self.deconv2 = UpsampleConvLayer(width * 2, width, kernel_size=3, stride=1, upsample=2)
        self.in5 = torch.nn.InstanceNorm2d(width, affine=True)
        self.deconv3 = ConvLayer(width, 3, kernel_size=5, stride=1)
        # Non-linearities
        self.relu = torch.nn.ReLU()

    def forward(self, X):
        y = self.relu(self.in1(self.conv1(X)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.relu(self.in3(self.conv3(y)))
        y = self.res(y)
        y = self.relu(self.in4(self.deconv1(y)))
        y = self.relu(self.in5(self.deconv2(y)))
        y = self.deconv3(y)
        return y


class Vgg(torch.nn.Module):
    """A VGG-shaped feature extractor (the example loads torchvision's pretrained VGG16 and
    slices its ``features``); returns the activations after each slice."""

    def __init__(self, requires_grad=False):
        super(Vgg, self).__init__()
        self.slice1 = torch.nn.Sequential(
            nn.Conv2d(3, 8, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(8, 8, kernel_size=3, padding=1), nn.ReLU(inplace=True))
        self.slice2 = torch.nn.Sequential(
            nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1), nn.ReLU(inplace=True))
        if not requires_grad:
            for param in self.parameters():
                param.requires_grad = False

    def forward(self, X):
        h = self.slice1(X)
        h_relu1_2 = h
        h = self.slice2(h)
        h_relu2_1 = h
        return (h_relu1_2, h_relu2_1)


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    gram = features.bmm(features_t) / (ch * h * w)
    return gram


def normalize_batch(batch):
    # normalize using imagenet mean and std
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    batch = batch.div(255.0)
    return (batch - mean) / std


def total_variation(y):
    return (torch.sum(torch.abs(y[:, :, :, :-1] - y[:, :, :, 1:])) +
            torch.sum(torch.abs(y[:, :, :-1, :] - y[:, :, 1:, :])))


def style_grams(vgg, style, batch_size):
    """The example's set-up: the style image repeated over a batch, its Gram matrices, once,
    outside the loop."""
    style = style.repeat(batch_size, 1, 1, 1)
    features_style = vgg(normalize_batch(style))
    return [gram_matrix(y) for y in features_style]


def make_optimizer(transformer, lr=1e-3):
    return optim.Adam(transformer.parameters(), lr)


def make_train_step(transformer, vgg, optimizer, gram_style, content_weight=1.0, style_weight=1e3,
                    tv_weight=1e-6):
    mse_loss = torch.nn.MSELoss()

    def train_step(x):
        n_batch = len(x)
        optimizer.zero_grad()

        y = transformer(x)

        y = normalize_batch(y)
        x = normalize_batch(x)

        features_y = vgg(y)
        features_x = vgg(x)

        content_loss = content_weight * mse_loss(features_y[1], features_x[1])

        style_loss = 0.
        for ft_y, gm_s in zip(features_y, gram_style):
            gm_y = gram_matrix(ft_y)
            style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
        style_loss *= style_weight

        total_loss = content_loss + style_loss + tv_weight * total_variation(y)
        total_loss.backward()
        optimizer.step()
        return total_loss

    return train_step
