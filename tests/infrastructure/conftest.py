"""Fixtures of the infrastructure tests: the store backends (see ``backends.py``)."""

from tests.infrastructure.backends import (
    durable_store_url,
    open_store,
    store,
    store_url,
)

__all__ = ["durable_store_url", "open_store", "store", "store_url"]
