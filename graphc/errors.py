"""graphc's error types (defined in ``graphc.ir`` so every layer can raise them)."""
from .ir.errors import DeviceError, GraphcError, PlanFormatError, ShapeError, TraceError, VerifyError

__all__ = ["DeviceError", "GraphcError", "PlanFormatError", "ShapeError", "TraceError", "VerifyError"]
