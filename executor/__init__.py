"""Executor: plans built from graphs, backends with kernel tables, plan files."""
from .backends import get_backend, parse_device
from .plan import Plan

__all__ = ["Plan", "get_backend", "parse_device"]
