"""Adapters: the SQLAlchemy trace store, the effect bus, sandboxes, the trace UI.

``bootstrap.py`` is the only composition root.
"""

__all__: list[str] = []
