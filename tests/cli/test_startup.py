"""The parser's light defaults agree with the infrastructure they mirror."""

from __future__ import annotations

from goatherd.cli import defaults
from goatherd.infrastructure.demo import default_demo_dir
from goatherd.infrastructure.trace_import import DEFAULT_MAX_LINE_BYTES
from goatherd.infrastructure.traceui import DEFAULT_ADDR


def test_the_parser_defaults_mirror_the_infrastructure() -> None:
    assert defaults.DEFAULT_ADDR == DEFAULT_ADDR
    assert defaults.default_demo_dir() == default_demo_dir()
    assert defaults.DEFAULT_MAX_LINE_BYTES == DEFAULT_MAX_LINE_BYTES
