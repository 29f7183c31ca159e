"""Which line of the user's code is running: the innermost stack frame outside graphc's
library. A leaf fact any room may import (node meta, error messages, the eager tape)."""
from __future__ import annotations

import os
import sys

from .. import executor as _executor, ir as _ir, passes as _passes

# The folders of graphc's four packages: frames from files inside them are not "user" code,
# except graphc's own applications (the demo and the benchmarks), whose models are user-level
# code that happens to ship with graphc: their nodes should point at their lines.
GRAPHC_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
PACKAGE_DIRS = (GRAPHC_DIR, *(os.path.dirname(os.path.abspath(package.__file__)) + os.sep
                              for package in (_ir, _passes, _executor)))
APPLICATION_FILES = (os.path.join(GRAPHC_DIR, "apps") + os.sep,)  # the demo's and the benchmarks' models


def _is_library_frame(filename: str) -> bool:
    if filename.startswith("<frozen "):  # the launcher (runpy for `python -m`), never user code
        return True
    return filename.startswith(PACKAGE_DIRS) and not filename.startswith(APPLICATION_FILES)


def user_frame():
    """The innermost stack frame whose code is outside graphc's library (or None)."""
    frame = sys._getframe(1)
    while frame is not None and _is_library_frame(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def user_source() -> str | None:
    frame = user_frame()
    if frame is None:
        return None
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
