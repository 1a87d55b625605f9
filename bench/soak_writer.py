"""One soak writer process: scope cycles against a shared trace until a deadline.

Each cycle forks an isolated child of the writer's root scope (a memory
sandbox on the root's repository), populates it, writes a file, checkpoints
it, seals it and settles the output (``selected`` two times out of three,
``discarded`` the third). Every command is timed. The writer reports what it
did (each child's expected final state, each output's action, each
checkpoint) so the parent can prove that nothing was lost or duplicated.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from goatherd.application import SandboxSpec, ScopeManager
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import open_trace_store

ROOT_PREFIX = "soak:w"


@dataclass
class WriterReport:
    """What one writer did, for the parent's proofs and figures."""

    name: str
    cycles: int = 0
    latencies: dict[str, list[float]] = field(default_factory=dict)
    scopes: dict[str, str] = field(default_factory=dict)  # scope id -> final state
    outputs: dict[str, str] = field(default_factory=dict)  # output id -> action
    checkpoints: list[str] = field(default_factory=list)
    started: float = 0.0  # time.time() when the barrier released the writers
    ended: float = 0.0
    error: str = ""


class _Timed:
    def __init__(self, report: WriterReport) -> None:
        self.report = report

    def __call__(self, command: str, fn: Any) -> Any:
        started = time.perf_counter()
        value = fn()
        elapsed = time.perf_counter() - started
        self.report.latencies.setdefault(command, []).append(elapsed)
        return value.unwrap() if hasattr(value, "unwrap") else value


def _cycle(
    manager: ScopeManager, root: Any, sandbox: MemorySandbox, n: int, timed: _Timed
) -> None:
    report = timed.report
    owner = f"{root.owner_id}:c{n}"
    child_sandbox = MemorySandbox(MemorySandboxConfig(repository=sandbox.repository))
    child_sandbox.create(SandboxSpec())
    child = timed(
        "fork", lambda: manager.fork_isolated(root.id, owner, None, child_sandbox)
    )
    baseline = child.baseline()
    timed("populate", lambda: child.apply_workspace(baseline))
    child_sandbox.write_file(f"work/{n}.txt", f"cycle {n}\n".encode())
    checkpoint = timed(
        "checkpoint", lambda: manager.create_checkpoint(child.id, b"snapshot")
    )
    report.checkpoints.append(checkpoint.id)
    output = timed("seal", lambda: manager.seal(child.id))
    action = "discarded" if n % 3 == 2 else "selected"
    timed("settle", lambda: manager.settle(output.id, action))
    report.outputs[output.id] = action
    report.scopes[child.id] = "discarded" if action == "discarded" else "merged"
    report.cycles += 1


def run_writer(url: str, name: str, seconds: float, barrier: Any, results: Any) -> None:
    """Run cycles for ``seconds`` after the barrier releases; put the report."""
    report = WriterReport(name)
    try:
        with open_trace_store(url) as store:
            manager = scope_manager_for(store)
            sandbox = MemorySandbox(MemorySandboxConfig(files={"README": b"soak\n"}))
            sandbox.create(SandboxSpec())
            root = manager.create(f"{ROOT_PREFIX}{name}", sandbox).unwrap()
            timed = _Timed(report)
            barrier.wait(timeout=120)
            report.started = time.time()
            deadline = report.started + seconds
            n = 0
            while time.time() < deadline:
                _cycle(manager, root, sandbox, n, timed)
                n += 1
            report.ended = time.time()
    except BaseException:
        report.error = traceback.format_exc()
    results.put(report)
