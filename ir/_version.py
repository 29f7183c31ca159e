"""The one place graphc's version is written (pyproject.toml reads it from here). It lives in
``ir``, the bottom layer, so the plan writer in ``executor`` can name its producer without
importing the user-facing package above it."""
__version__ = "0.1.0"
