"""Use cases (commands and queries), ports, and the runtime services.

The only layer whose public commands return ``returns.Result``. It may import
the domain and projections, never SQLAlchemy, HTTP or driver libraries.
"""

__all__: list[str] = []
