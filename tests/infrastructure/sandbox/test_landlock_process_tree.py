"""No process a confined command starts outlives its exec.

Real processes on this kernel: the command leaves a child behind the ways a
daemon does - ``setsid``, a double fork, ``nohup``, ignoring SIGTERM and
SIGHUP, stopping itself, a burst of thirty - and each leftover writes its pid
into the workspace and keeps appending to a file. When ``exec`` returns (the
command exited) or raises ``ExecTimeoutError``, every listed pid must be gone
and the file must have stopped growing. Both mechanisms run every scenario:
the cgroup leaf (where this host lets us make one) and the subreaper.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from goatherd.application import (
    ContainmentError,
    ContainmentUnavailableError,
    ExecRequest,
    ExecTimeoutError,
)
from goatherd.infrastructure.sandbox import LandlockBackend, landlock_abi
from goatherd.infrastructure.sandbox.launch import cgroup
from goatherd.infrastructure.sandbox.launch.cgroup import LEAF_PREFIX
from tests.infrastructure.sandbox.native import alive, kill_listed, pids_in, wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock"),
]

LOOP = "while :; do echo x >> ticks; sleep 0.05; done"
QUIET = ">/dev/null 2>&1 </dev/null"
LEFTOVERS = {
    "setsid": f"setsid sh -c 'echo $$ >> pids; {LOOP}' {QUIET} &",
    "double fork": f"( sh -c 'echo $$ >> pids; {LOOP}' {QUIET} & ) ;",
    "nohup": f"nohup sh -c 'echo $$ >> pids; {LOOP}' {QUIET} &",
    "setsid double fork": f"( setsid sh -c 'echo $$ >> pids; {LOOP}' {QUIET} & ) ;",
    "ignores TERM and HUP": (
        f"sh -c 'trap \"\" TERM HUP INT; echo $$ >> pids; {LOOP}' {QUIET} &"
    ),
    "stopped": "( sh -c 'echo $$ >> pids; kill -STOP $$; echo woke >> ticks' & ) ;",
    "thirty": (
        "for i in $(seq 30); do "
        f"( setsid sh -c 'echo $$ >> pids; exec sleep 60' {QUIET} & ); done;"
    ),
}
# Started before the command's end; the command waits until all are listed.
EXPECTED = {name: 30 if name == "thirty" else 1 for name in LEFTOVERS}
MECHANISMS = {"default": {}, "subreaper": {"process_control": "subreaper"}}


@pytest.fixture
def inside(tmp_path: Path) -> Iterator[Path]:
    workspace = tmp_path / "inside"
    workspace.mkdir()
    for _ in kill_listed(workspace / "pids"):
        yield workspace


def _script(name: str, then: str) -> ExecRequest:
    wait = (
        f'n=0; while [ "$(cat pids 2>/dev/null | wc -l)" -lt {EXPECTED[name]} ]; '
        "do sleep 0.01; n=$((n+1)); [ $n -gt 1000 ] && break; done; "
    )
    return ExecRequest("sh", ("-c", f"{LEFTOVERS[name]} {wait} {then}"))


def _assert_all_gone(inside: Path, name: str) -> None:
    pids = pids_in(inside / "pids")
    assert len(pids) == EXPECTED[name]
    assert [pid for pid in pids if alive(pid)] == []
    ticks = inside / "ticks"
    size = ticks.stat().st_size if ticks.exists() else 0
    time.sleep(0.2)
    assert (ticks.stat().st_size if ticks.exists() else 0) == size


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
@pytest.mark.parametrize("name", sorted(LEFTOVERS))
def test_leftovers_are_gone_when_exec_returns(
    inside: Path, name: str, mechanism: str
) -> None:
    backend = LandlockBackend(**MECHANISMS[mechanism])  # type: ignore[arg-type]
    result = backend.run(
        _script(name, "echo started"), writable_roots=[str(inside)], cwd=str(inside)
    )
    assert (result.exit_code, result.stdout) == (0, b"started\n")
    _assert_all_gone(inside, name)


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
@pytest.mark.parametrize("name", sorted(LEFTOVERS))
def test_leftovers_are_gone_when_exec_times_out(
    inside: Path, name: str, mechanism: str
) -> None:
    backend = LandlockBackend(**MECHANISMS[mechanism])  # type: ignore[arg-type]
    request = _script(name, "sleep 30")
    timed = ExecRequest(request.command, request.args, timeout=1.0)
    started = time.monotonic()
    with pytest.raises(ExecTimeoutError, match="timeout"):
        backend.run(timed, writable_roots=[str(inside)], cwd=str(inside))
    assert time.monotonic() - started < 15
    _assert_all_gone(inside, name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_a_leftover_holding_the_output_pipe_does_not_hold_up_exec(
    inside: Path, mechanism: str
) -> None:
    # Without the tree kill the host would wait for end-of-file on stdout,
    # which a daemon that keeps the pipe never sends.
    backend = LandlockBackend(**MECHANISMS[mechanism])  # type: ignore[arg-type]
    script = f"setsid sh -c 'echo $$ >> pids; {LOOP}' & sleep 0.2; echo done"
    result = backend.run(
        ExecRequest("sh", ("-c", script)), writable_roots=[str(inside)], cwd=str(inside)
    )
    assert result.stdout == b"done\n"
    _assert_all_gone(inside, "setsid")


HOST = f"""
import sys
from goatherd.application import ExecRequest
from goatherd.infrastructure.sandbox import LandlockBackend
inside, control = sys.argv[1], sys.argv[2]
script = "setsid sh -c 'echo $$ >> pids; {LOOP}' {QUIET} & sleep 60"
LandlockBackend(process_control=control).run(
    ExecRequest("sh", ("-c", script)), writable_roots=[inside], cwd=inside
)
"""


@pytest.mark.parametrize("control", ["auto", "subreaper"])
def test_leftovers_die_when_the_host_process_is_killed(
    inside: Path, control: str
) -> None:
    host = subprocess.Popen([sys.executable, "-c", HOST, str(inside), control])
    try:
        assert wait_for(lambda: pids_in(inside / "pids"), timeout=20)
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
    (leftover,) = pids_in(inside / "pids")
    # The launcher sees its control pipe close, kills the tree and removes
    # the exec's cgroup leaf, if it had one.
    assert wait_for(lambda: not alive(leftover), timeout=10)
    assert wait_for(lambda: not _leaves_of(host.pid), timeout=10)


def _leaves_of(pid: int) -> list[str]:
    try:
        parent = cgroup.delegated_cgroup()
    except OSError:
        return []
    return [n for n in os.listdir(parent) if n.startswith(f"{LEAF_PREFIX}{pid}-")]


def _plant_stale_leaf(parent: str) -> tuple[str, subprocess.Popen[bytes]]:
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = os.path.join(parent, f"{LEAF_PREFIX}{gone.pid}-0123456789ab")
    os.mkdir(stale)
    orphan = subprocess.Popen(
        ["sh", "-c", f"echo 0 > {stale}/cgroup.procs && exec sleep 60"]
    )
    return stale, orphan


def test_a_leaf_left_by_a_dead_host_is_killed_and_removed_by_the_next_exec(
    inside: Path,
) -> None:
    # Both the host and its launcher killed outright leave a populated leaf.
    try:
        parent = cgroup.delegated_cgroup()
    except OSError as exc:
        pytest.skip(f"no cgroup leaf can be made here: {exc}")
    # Any exec on this machine sweeps stale leaves (another test worker's may
    # come first and take the leaf before the orphan joins it): plant again
    # until the orphan is seen inside, then the next exec must end it.
    for _ in range(5):
        stale, orphan = _plant_stale_leaf(parent)
        joined = [orphan.pid]
        if wait_for(lambda s=stale, j=joined: cgroup.leaf_pids(s) == j, timeout=10):
            break
        orphan.kill()
        orphan.wait()
    else:
        pytest.fail("a concurrent exec swept every planted leaf before it was joined")
    try:
        backend = LandlockBackend(process_control="cgroup")  # type: ignore[arg-type]
        backend.run(ExecRequest("true"), writable_roots=[str(inside)], cwd=str(inside))
        assert orphan.wait(timeout=10) == -signal.SIGKILL
        assert not os.path.exists(stale)
    finally:
        orphan.kill()
        orphan.wait()
        cgroup.kill_leaf(stale)
        if cgroup.wait_leaf_empty(stale, 5):
            cgroup.remove_leaf(stale)


def _parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def test_with_a_cgroup_leftovers_die_even_when_the_launcher_is_killed(
    inside: Path,
) -> None:
    # Only a process outside the sandbox can kill the launcher (on ABI >= 6 the
    # command cannot signal it); the cgroup still holds every leftover.
    backend = LandlockBackend(process_control="cgroup")  # type: ignore[arg-type]
    try:
        backend.process_control_in_use()
    except ContainmentUnavailableError as exc:
        pytest.skip(str(exc))
    leftover = f"setsid sh -c 'echo $$ >> pids; {LOOP}' {QUIET} &"
    script = f"echo $$ >> pids; {leftover} exec sleep 60"

    def kill_launcher() -> None:
        if wait_for(lambda: len(pids_in(inside / "pids")) == 2, timeout=20):
            os.kill(_parent_of(pids_in(inside / "pids")[0]), signal.SIGKILL)

    killer = threading.Thread(target=kill_launcher)
    killer.start()
    try:
        with pytest.raises(ContainmentError, match="launcher ended"):
            backend.run(
                ExecRequest("sh", ("-c", script)),
                writable_roots=[str(inside)],
                cwd=str(inside),
            )
    finally:
        killer.join()
    pids = pids_in(inside / "pids")
    assert len(pids) == 2
    assert [pid for pid in pids if alive(pid)] == []


def test_under_the_subreaper_a_launcher_killed_from_outside_is_reported(
    inside: Path,
) -> None:
    # The documented limit of the subreaper (docs/containment.md): once the
    # launcher is gone its orphans belong to init. exec does not hang or
    # pretend: it raises after the grace period. (The fixture kills them.)
    backend = LandlockBackend(process_control="subreaper")  # type: ignore[arg-type]
    leftover = f"setsid sh -c 'echo $$ >> pids; {LOOP}' {QUIET} &"
    script = f"echo $$ >> pids; {leftover} exec sleep 60"

    def kill_launcher() -> None:
        if wait_for(lambda: len(pids_in(inside / "pids")) == 2, timeout=20):
            os.kill(_parent_of(pids_in(inside / "pids")[0]), signal.SIGKILL)

    killer = threading.Thread(target=kill_launcher)
    killer.start()
    started = time.monotonic()
    try:
        with pytest.raises(ContainmentError, match="could not all be stopped"):
            backend.run(
                ExecRequest("sh", ("-c", script)),
                writable_roots=[str(inside)],
                cwd=str(inside),
            )
    finally:
        killer.join()
    assert time.monotonic() - started < 30
