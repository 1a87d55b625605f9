"""Use cases (commands and queries), ports, and the runtime services.

The only layer whose public commands return ``returns.Result``. It may import
the domain and projections, never SQLAlchemy, HTTP or driver libraries.
"""

from goatherd.application import substrates
from goatherd.application.substrates import *

__all__: list[str] = []
__all__ += substrates.__all__
