"""Op definitions. Importing this package registers every op in ``ir.registry``."""
from . import attention, collective, control, conv, custom, elementwise, fused, linalg, loss, norm, pool, recurrent_cell, reduce, shape  # noqa: F401  (registration side effect)
from . import conv_transpose  # noqa: F401  (registration side effect)
from . import scatter  # noqa: F401  (registration side effect)
from . import elementwise_math  # noqa: F401  (registration side effect)
from . import fft  # noqa: F401  (registration side effect)
