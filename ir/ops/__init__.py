"""Op definitions. Importing this package registers every op in ``ir.registry``."""
from . import elementwise, nn, reduce, shape  # noqa: F401  (registration side effect)
