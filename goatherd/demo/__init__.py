"""``goatherd demo``: a scripted best-of-n session on a sample git project.

``project`` creates the sample project, ``agents`` holds the three scripted
attempts as data, ``agent_runner`` executes one behind the supervisor's gate,
``rules`` builds the demo's supervisor, ``state`` reads the session back from
the trace, ``resume`` finishes what a crash interrupted, ``layout`` owns the
directory, ``session`` runs it all and ``summary`` renders the result. See ADR 0022.
"""

from goatherd.demo.layout import (
    DemoError,
    DemoLayout,
    default_demo_dir,
)
from goatherd.demo.session import DemoOptions, DemoRun, run_demo
from goatherd.demo.summary import render_summary, summary_json

__all__ = [
    "DemoError",
    "DemoLayout",
    "DemoOptions",
    "DemoRun",
    "default_demo_dir",
    "render_summary",
    "run_demo",
    "summary_json",
]
