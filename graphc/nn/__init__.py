"""``graphc.nn``: modules with PyTorch's API, plus ``graphc.nn.functional``."""
from . import functional, init
from .containers import Identity, ModuleList, Sequential
from .layers import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, Conv2d, Dropout, Flatten, LeakyReLU,
                     Linear, LogSoftmax, MaxPool2d, ReLU, Sigmoid, Softmax, Tanh)
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss
from .module import Module, Parameter

__all__ = [
    "AdaptiveAvgPool2d", "AvgPool2d", "BCEWithLogitsLoss", "BatchNorm1d", "BatchNorm2d", "Conv2d",
    "CrossEntropyLoss", "Dropout", "Flatten", "Identity", "LeakyReLU", "Linear", "LogSoftmax", "MSELoss",
    "MaxPool2d", "Module", "ModuleList", "Parameter", "ReLU", "Sequential", "Sigmoid", "Softmax", "Tanh",
    "functional", "init",
]
