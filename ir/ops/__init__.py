"""Op definitions. Importing this package registers every op in ``ir.registry``."""
from . import conv, elementwise, linalg, norm, reduce, shape  # noqa: F401  (registration side effect)
