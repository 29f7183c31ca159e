"""``graphc.optim``: SGD, Adam, AdamW and ``lr_scheduler``."""
from . import lr_scheduler
from .optimizer import SGD, Adam, AdamW, Optimizer

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "lr_scheduler"]
