"""Adapters that put goatherd's trace under other frameworks (optional extras).

Each subpackage needs its framework installed (``pip install goatherd[NAME]``);
importing this package alone needs nothing beyond the core.
"""

from __future__ import annotations

__all__: list[str] = []
