"""The read-only trace UI: HTTP API, server-sent events and the browser viewer."""

from goatherd.infrastructure.traceui import app, query, server
from goatherd.infrastructure.traceui.app import *
from goatherd.infrastructure.traceui.query import *
from goatherd.infrastructure.traceui.server import *

__all__ = []
__all__ += app.__all__
__all__ += query.__all__
__all__ += server.__all__
