"""Small PyTorch classifiers written the way torchvision and timm write theirs, one per family
the ONNX import issue names: a ResNet (basic blocks, a strided shortcut), a MobileNetV2
(inverted residuals, ReLU6, depthwise convolutions), an EfficientNet (SiLU, squeeze-excite,
stochastic depth in eval), a ConvNeXt (7x7 depthwise, channels-last LayerNorm through permutes,
GELU, layer scale), a DenseNet (concatenated features, average-pool transitions), a GoogLeNet
(inception branches, ``ceil_mode`` max pools) and a Vision Transformer (patch embedding, class
token expanded to the batch, pre-norm ``nn.MultiheadAttention`` blocks). tests/test_onnx_torch_classifiers.py
exports them with ``torch.onnx.export`` and imports them into graphc; benchmarks/onnx_zoo.py runs
the real torchvision/timm models where torchvision is installed."""
from __future__ import annotations

import torch
from torch import nn


def _conv_bn(cin, cout, k=3, stride=1, groups=1, act=nn.ReLU):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act is not None else nn.Sequential(*layers)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(_conv_bn(cin, cout, 3, stride), _conv_bn(cout, cout, 3, act=None))
        self.shortcut = _conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(3, 16, 7, 2), nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 32, 2))
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand, act=nn.ReLU6, se=False):
        super().__init__()
        hidden = cin * expand
        layers = [_conv_bn(cin, hidden, 1, act=act), _conv_bn(hidden, hidden, 3, stride, groups=hidden, act=act)]
        if se:
            layers.append(SqueezeExcite(hidden, max(1, cin // 4)))
        layers.append(_conv_bn(hidden, cout, 1, act=None))
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


class SqueezeExcite(nn.Module):
    def __init__(self, channels, squeezed):
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(channels, squeezed, 1), nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        scale = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.expand(nn.functional.silu(self.reduce(scale))))


class MobileNetV2(nn.Module):
    def __init__(self, classes=10, act=nn.ReLU6, se=False):
        super().__init__()
        self.features = nn.Sequential(_conv_bn(3, 16, 3, 2, act=act), InvertedResidual(16, 16, 1, 1, act, se),
                                      InvertedResidual(16, 24, 2, 4, act, se), InvertedResidual(24, 24, 1, 4, act, se),
                                      _conv_bn(24, 64, 1, act=act))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, classes))

    def forward(self, x):
        return self.classifier(nn.functional.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


def efficientnet(classes=10):
    return MobileNetV2(classes, act=nn.SiLU, se=True)


class LayerNorm2d(nn.LayerNorm):
    """timm's and torchvision's ConvNeXt norm: LayerNorm over channels through permutes."""

    def forward(self, x):
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.gamma = nn.Parameter(torch.full((dim,), 0.5))

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        return x + (self.gamma * self.mlp(self.norm(y))).permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 24, 4, 4), LayerNorm2d(24, eps=1e-6))
        self.stages = nn.Sequential(ConvNeXtBlock(24), LayerNorm2d(24, eps=1e-6), nn.Conv2d(24, 48, 2, 2),
                                    ConvNeXtBlock(48))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.LayerNorm(48, eps=1e-6),
                                  nn.Linear(48, classes))

    def forward(self, x):
        return self.head(self.stages(self.stem(x)))


class DenseLayer(nn.Module):
    def __init__(self, cin, growth):
        super().__init__()
        self.body = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, 2 * growth, 1, bias=False),
                                  nn.BatchNorm2d(2 * growth), nn.ReLU(), nn.Conv2d(2 * growth, growth, 3, 1, 1, bias=False))

    def forward(self, features):
        return torch.cat([features, self.body(features)], 1)


class DenseNet(nn.Module):
    def __init__(self, classes=10, growth=8):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), DenseLayer(16, growth),
                                      DenseLayer(16 + growth, growth), nn.BatchNorm2d(16 + 2 * growth), nn.ReLU(),
                                      nn.Conv2d(16 + 2 * growth, 16, 1, bias=False), nn.AvgPool2d(2, 2),
                                      DenseLayer(16, growth), nn.BatchNorm2d(16 + growth), nn.ReLU())
        self.classifier = nn.Linear(16 + growth, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1)), 1))


class Inception(nn.Module):
    def __init__(self, cin, c1, c3, c5, pool):
        super().__init__()
        self.b1 = _conv_bn(cin, c1, 1)
        self.b3 = nn.Sequential(_conv_bn(cin, c3, 1), _conv_bn(c3, c3, 3))
        self.b5 = nn.Sequential(_conv_bn(cin, c5, 1), _conv_bn(c5, c5, 3))
        self.bp = nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True), _conv_bn(cin, pool, 1))

    def forward(self, x):
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], 1)


class GoogLeNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(3, 16, 7, 2), nn.MaxPool2d(3, 2, ceil_mode=True))
        self.inception = nn.Sequential(Inception(16, 8, 12, 4, 4), nn.MaxPool2d(3, 2, ceil_mode=True),
                                       Inception(28, 8, 8, 8, 8))
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.inception(self.stem(x)), (1, 1))
        return self.fc(torch.flatten(x, 1))


class EncoderBlock(nn.Module):
    """torchvision's ViT block: pre-norm self-attention (nn.MultiheadAttention) and a GELU MLP."""

    def __init__(self, dim, heads):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        y = self.ln_1(x)
        x = x + self.self_attention(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class VisionTransformer(nn.Module):
    def __init__(self, classes=10, size=32, patch=8, dim=32, heads=4):
        super().__init__()
        self.patchify = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (size // patch) ** 2 + 1, dim) * 0.02)
        self.encoder = nn.Sequential(EncoderBlock(dim, heads), EncoderBlock(dim, heads))
        self.norm, self.head = nn.LayerNorm(dim, eps=1e-6), nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patchify(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.encoder(x))[:, 0])


CLASSIFIERS = {"resnet": (ResNet, 64), "mobilenet_v2": (MobileNetV2, 64), "efficientnet": (efficientnet, 64),
               "convnext": (ConvNeXt, 64), "densenet": (DenseNet, 32), "googlenet": (GoogLeNet, 61),
               "vit": (VisionTransformer, 32)}


def calibrated(name: str) -> tuple:
    """(the model in eval mode, its input size): BatchNorm statistics from one training-mode
    pass over random images, as a trained model has, so the logits are not vanishingly small."""
    make, size = CLASSIFIERS[name]
    torch.manual_seed(35)
    model = make()
    model.train()
    for layer in model.modules():
        if isinstance(layer, nn.BatchNorm2d):
            layer.momentum = None  # a cumulative average: one pass sets the statistics to the batch's
    with torch.no_grad():
        model(torch.randn(16, 3, size, size))
    return model.eval(), size
