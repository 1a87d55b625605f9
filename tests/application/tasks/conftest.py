"""Fixtures of the task runtime tests: the durable store backends (file, PostgreSQL)."""

from tests.infrastructure.backends import durable_store_url

__all__ = ["durable_store_url"]
