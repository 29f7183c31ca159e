"""``graphc.optim``: SGD, Adam, AdamW, Adadelta, RMSprop, Adagrad and ``lr_scheduler``."""
from . import lr_scheduler
from .adaptive import Adadelta, Adagrad, RMSprop
from .optimizer import SGD, Adam, AdamW, Optimizer

__all__ = ["SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "lr_scheduler"]
