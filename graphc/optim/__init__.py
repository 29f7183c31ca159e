"""``graphc.optim``: SGD, Adam, AdamW, Adadelta, RMSprop, Adagrad and ``lr_scheduler``."""
from . import lr_scheduler
from .adaptive import Adadelta, Adagrad, RMSprop
from .lbfgs import LBFGS
from .optimizer import SGD, Adam, AdamW, Optimizer

__all__ = ["LBFGS", "SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "lr_scheduler"]
