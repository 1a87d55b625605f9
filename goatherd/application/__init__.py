"""Use cases (commands and queries), ports, and the runtime services.

The only layer whose public commands return ``returns.Result``. It may import
the domain and projections, never SQLAlchemy, HTTP or driver libraries.
"""

from goatherd.application import errors, ports, substrates
from goatherd.application.errors import *
from goatherd.application.ports import *
from goatherd.application.substrates import *

__all__: list[str] = []
__all__ += errors.__all__
__all__ += ports.__all__
__all__ += substrates.__all__
