"""``gc.debug``: the tools for looking inside a plan. ``profile`` times a step node by node and
per op kind, with module paths and source lines; ``compare_backends`` runs a plan on two
devices and names the first node whose values differ; ``find_nonfinite`` names the first node
(forward or backward) that makes a NaN or an infinity.
"""
from __future__ import annotations

from .numerics import Comparison, Mismatch, NonFiniteNode, compare_backends, find_nonfinite
from .profile import NodeTime, OpTime, Profile, profile

__all__ = ["Comparison", "Mismatch", "NodeTime", "NonFiniteNode", "OpTime", "Profile", "compare_backends",
           "find_nonfinite", "profile"]
