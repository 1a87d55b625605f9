"""Git sandbox operations on a generated repository of 2,000 files, 10 changed.

Issue targets: capture <= 20 ms, apply <= 40 ms, diff <= 20 ms, an isolated
fork (worktree create + apply of the fork state) <= 250 ms. The memory
backend is timed on the same shape for reference.

Confined exec (issue 14, no target): one Landlock exec of ``true`` with each
process-control mechanism, against baselines measured in the same rounds -
``true`` started directly, the launcher's bare interpreter start
(``python -I -S -B -c pass``), and an unsupervised launcher that restricts
itself and execs (what the backend did before issue 14: no fork, no tree
kill, no cgroup) - so the ratio to it is the cost of supervision.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.timing import per_call_seconds
from goatherd.application import ExecRequest, SandboxSpec
from goatherd.infrastructure.sandbox import (
    LandlockBackend,
    MemorySandbox,
    MemorySandboxConfig,
    ProcessControl,
    landlock_abi,
    new_local_git_sandbox,
    new_worktree_sandbox,
)
from goatherd.infrastructure.sandbox.launch import landlock_sys

FILES = 2000
CHANGED = 10


def _files() -> dict[str, bytes]:
    return {
        f"pkg{i % 40:02d}/mod{i:04d}.py": f"# module {i}\nVALUE = {i}\n".encode() * 8
        for i in range(FILES)
    }


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def _make_repo(root: Path) -> Path:
    repo = root / "repo"
    for name, data in _files().items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "generated")
    return repo


def _no_git(directory: str, names: list[str]) -> list[str]:
    return [".git"] if ".git" in names else []


def _change(root: Path, round_: int) -> None:
    """Make 10 changes: 7 edits, 2 new files, 1 deletion (restored first)."""
    for i in range(7):
        (root / f"pkg{i:02d}/mod{i:04d}.py").write_bytes(f"edit {round_}\n".encode())
    for i in range(2):
        (root / f"new/file{i}.txt").parent.mkdir(exist_ok=True)
        (root / f"new/file{i}.txt").write_bytes(f"new {round_}\n".encode())
    victim = root / "pkg10/mod0010.py"
    if victim.exists():
        victim.unlink()


def _timed(setup: Callable[[], object], fn: Callable[[], object], n: int) -> float:
    samples = []
    for _ in range(n):
        setup()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def _bench_git(root: Path) -> None:
    repo = _make_repo(root)
    sandbox = new_local_git_sandbox(repo)
    _change(repo, 0)
    state = sandbox.capture()
    capture = per_call_seconds(sandbox.capture, number=10)
    diff = per_call_seconds(lambda: sandbox.diff(state), number=10)
    counter = iter(range(1, 10_000))
    apply = _timed(
        lambda: _change(repo, next(counter)), lambda: sandbox.apply(state), 15
    )
    forks = iter(range(10_000))
    made: list[object] = []

    def fork() -> None:
        child = new_worktree_sandbox(repo, root / f"wt{next(forks)}")
        child.create(SandboxSpec())
        child.apply(state)
        made.append(child)

    isolated = _timed(lambda: None, fork, 7)
    copies = iter(range(10_000))
    baseline = _timed(
        lambda: None,
        lambda: shutil.copytree(repo, root / f"copy{next(copies)}", ignore=_no_git),
        7,
    )
    for child in made:
        child.destroy()  # type: ignore[attr-defined]
    print(f"git capture ({FILES} files, {CHANGED} changed): {_ms(capture)}", end="")
    print(" (target <= 20 ms)")
    print(f"git apply: {_ms(apply)} (target <= 40 ms)")
    print(f"git diff: {_ms(diff)} (target <= 20 ms)")
    print(f"git isolated fork (worktree create + apply): {_ms(isolated)}", end="")
    print(" (target <= 250 ms)")
    print(
        f"filesystem baseline in the same run: copying the {FILES}-file tree "
        f"(shutil.copytree) takes {_ms(baseline)}; fork/copy ratio "
        f"{isolated / baseline:.2f}"
    )


def _bench_memory() -> None:
    sandbox = MemorySandbox(MemorySandboxConfig(files=_files()))
    sandbox.create(SandboxSpec())
    for i in range(CHANGED):
        sandbox.write_file(f"pkg{i:02d}/mod{i:04d}.py", b"edit\n")
    state = sandbox.capture()
    capture = per_call_seconds(sandbox.capture, number=20)
    diff = per_call_seconds(lambda: sandbox.diff(state), number=20)
    apply = per_call_seconds(lambda: sandbox.apply(state), number=20)
    print(
        f"memory capture {_ms(capture)}, apply {_ms(apply)}, diff {_ms(diff)} "
        f"(same shape, reference)"
    )


def _bench_fork_on(where: str) -> None:
    with tempfile.TemporaryDirectory(prefix="goatherd-bench-", dir=where) as tmp:
        root = Path(tmp)
        repo = _make_repo(root)
        _change(repo, 0)
        state = new_local_git_sandbox(repo).capture()
        forks = iter(range(10_000))

        def fork() -> None:
            child = new_worktree_sandbox(repo, root / f"wt{next(forks)}")
            child.create(SandboxSpec())
            child.apply(state)

        seconds = _timed(lambda: None, fork, 7)
        print(f"git isolated fork with the repository on {where}: {_ms(seconds)}")


EXEC_ROUNDS = 40
SANDBOX_DIR = str(Path(landlock_sys.__file__).parents[1])
UNSUPERVISED = [
    sys.executable,
    *("-I", "-S", "-B", "-c"),
    "import os, sys; sys.path.append(sys.argv[1]); "
    "from launch.landlock_sys import abi_version, restrict_self; "
    "restrict_self([sys.argv[2], '/dev/null'], False, abi_version()); "
    "os.execvp('true', ['true'])",
]


def _exec_rounds(root: Path) -> dict[str, list[tuple[float, float]]]:
    """Time every variant once per round, interleaved, so load hits all alike."""
    request = ExecRequest("true")
    variants: dict[str, Callable[[], object]] = {
        "true, started directly": lambda: subprocess.run(["true"], check=True),
        "bare launcher interpreter": lambda: subprocess.run(
            [sys.executable, "-I", "-S", "-B", "-c", "pass"], check=True, env={}
        ),
        "unsupervised restrict-and-exec": lambda: subprocess.run(
            [*UNSUPERVISED, SANDBOX_DIR, str(root)], check=True, env={}
        ),
    }
    for control in (ProcessControl.CGROUP, ProcessControl.SUBREAPER):
        backend = LandlockBackend(process_control=control)
        try:
            backend.probe()
        except Exception as exc:
            print(f"confined exec with {control}: not available here ({exc})")
            continue
        variants[f"confined exec, {control}"] = lambda b=backend: b.run(  # type: ignore[misc]
            request, writable_roots=[str(root)], cwd=str(root)
        )
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _ in range(EXEC_ROUNDS):
        for name, fn in variants.items():
            cpu, start = _cpu_seconds(), time.perf_counter()
            fn()
            wall = time.perf_counter() - start
            samples[name].append((wall, _cpu_seconds() - cpu))
    return samples


def _cpu_seconds() -> float:
    """CPU time of this process and its reaped children (the launchers, commands)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _bench_exec(root: Path) -> None:
    if landlock_abi() < 1:
        print("confined exec: this kernel has no Landlock")
        return
    samples = _exec_rounds(root)
    wall = {n: statistics.median(w for w, _ in s) for n, s in samples.items()}
    cpu = {n: statistics.median(c for _, c in s) for n, s in samples.items()}
    base = "unsupervised restrict-and-exec"
    load = os.getloadavg()[0]
    print(f"confined exec of true, median of {EXEC_ROUNDS} interleaved rounds", end="")
    print(f" (load {load:.1f}); ratios to the unsupervised launcher:")
    for name in samples:
        print(
            f"  {name}: wall {_ms(wall[name])} ({wall[name] / wall[base]:.2f} x), "
            f"CPU {_ms(cpu[name])} ({cpu[name] / cpu[base]:.2f} x)"
        )


def run() -> None:
    with tempfile.TemporaryDirectory(prefix="goatherd-bench-") as tmp:
        _bench_exec(Path(tmp))
    with tempfile.TemporaryDirectory(prefix="goatherd-bench-") as tmp:
        _bench_git(Path(tmp))
    if Path("/dev/shm").is_dir():
        _bench_fork_on("/dev/shm")
    _bench_memory()
