"""Passes: pure functions Graph -> Graph (autodiff, dce, cse, folding, fusions)."""
