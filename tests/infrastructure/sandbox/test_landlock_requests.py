"""Bad requests and configurations are refused by name; nothing runs.

Also: the command starts with default signal dispositions (the launcher is
Python, which ignores SIGPIPE), and the process control in use is reported.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from goatherd.application import (
    ContainmentError,
    ExecRequest,
    InvalidExecRequestError,
    SandboxConfigError,
    SandboxError,
)
from goatherd.infrastructure.sandbox import (
    LandlockBackend,
    ProcessControl,
    landlock_abi,
)
from goatherd.infrastructure.sandbox.launch import cgroup, landlock_sys
from tests.infrastructure.sandbox.native import alive, pids_in, wait_for

needs_landlock = pytest.mark.skipif(
    landlock_abi() < 1, reason="this kernel has no Landlock"
)


@pytest.fixture
def inside(tmp_path: Path) -> Path:
    (tmp_path / "inside").mkdir()
    return tmp_path / "inside"


BAD_REQUESTS = {
    "empty command": (ExecRequest(""), "command is empty"),
    "NUL in command": (ExecRequest("sh\0x"), "command contains a NUL"),
    "command not a string": (ExecRequest(b"sh"), "command must be a string"),  # type: ignore[arg-type]
    "args as one string": (ExecRequest("sh", "-c"), "args must be a sequence"),  # type: ignore[arg-type]
    "NUL in an argument": (
        ExecRequest("sh", ("-c", "a\0b")),
        r"args\[1\] contains a NUL",
    ),
    "argument not a string": (
        ExecRequest("sh", ("-c", 3)),  # type: ignore[arg-type]
        r"args\[1\] must be a string",
    ),
    "env not a mapping": (ExecRequest("sh", env=[("A", "1")]), "env must be a mapping"),  # type: ignore[arg-type]
    "= in an env name": (ExecRequest("sh", env={"A=B": "1"}), "'A=B' contains '='"),
    "empty env name": (ExecRequest("sh", env={"": "1"}), "env name is empty"),
    "NUL in an env value": (
        ExecRequest("sh", env={"A": "1\0"}),
        "env A contains a NUL",
    ),
    "env value not a string": (
        ExecRequest("sh", env={"A": 1}),  # type: ignore[dict-item]
        "env A must be a string",
    ),
    "zero timeout": (ExecRequest("sh", timeout=0), "timeout must be a positive"),
    "negative timeout": (ExecRequest("sh", timeout=-1), "timeout must be a positive"),
    "NaN timeout": (ExecRequest("sh", timeout=math.nan), "timeout must be a positive"),
    "infinite timeout": (
        ExecRequest("sh", timeout=math.inf),
        "timeout must be a positive",
    ),
    "bool timeout": (ExecRequest("sh", timeout=True), "timeout must be a positive"),
    "text timeout": (ExecRequest("sh", timeout="5"), "timeout must be a positive"),  # type: ignore[arg-type]
    "stdin as text": (ExecRequest("sh", stdin="hi"), "stdin must be bytes"),  # type: ignore[arg-type]
}


@needs_landlock
@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(BAD_REQUESTS))
def test_a_bad_request_field_is_named_and_nothing_runs(inside: Path, name: str) -> None:
    request, message = BAD_REQUESTS[name]
    probe = ExecRequest(
        request.command,
        request.args,
        env=request.env,
        timeout=request.timeout,
        stdin=request.stdin,
    )
    with pytest.raises(InvalidExecRequestError, match=message) as caught:
        LandlockBackend().run(probe, writable_roots=[str(inside)], cwd=str(inside))
    assert "\n" not in str(caught.value)
    assert list(inside.iterdir()) == []


@needs_landlock
@pytest.mark.integration
def test_a_missing_working_directory_is_refused(inside: Path) -> None:
    with pytest.raises(SandboxError, match="working directory"):
        LandlockBackend().run(
            ExecRequest("true"), writable_roots=[str(inside)], cwd=str(inside / "no")
        )


BAD_CONFIGS = {
    "unknown network": ({"network": "offline"}, "unknown network mode 'offline'"),
    "negative max_abi": ({"max_abi": -1}, "max_abi must be None or an integer"),
    "bool max_abi": ({"max_abi": True}, "max_abi must be None or an integer"),
    "text max_abi": ({"max_abi": "3"}, "max_abi must be None or an integer"),
    "gaps as one string": ({"accept_gaps": "truncate"}, "must be a set of gap"),
    "unknown gap": ({"accept_gaps": {"ptrace"}}, "unknown gap in accept_gaps"),
    "unknown control": ({"process_control": "pidns"}, "unknown process control"),
    "metadata as text": ({"deny_metadata": "yes"}, "deny_metadata must be a bool"),
    "io_uring as int": ({"allow_io_uring": 1}, "allow_io_uring must be a bool"),
}


@pytest.mark.parametrize("name", sorted(BAD_CONFIGS))
def test_a_bad_backend_configuration_is_refused_by_name(name: str) -> None:
    kwargs, message = BAD_CONFIGS[name]
    with pytest.raises(SandboxConfigError, match=message):
        LandlockBackend(**kwargs)  # type: ignore[arg-type]


def test_names_are_accepted_for_the_enumerations() -> None:
    backend = LandlockBackend(
        network="deny",  # type: ignore[arg-type]
        accept_gaps={"signals"},
        process_control="subreaper",  # type: ignore[arg-type]
    )
    assert backend.process_control is ProcessControl.SUBREAPER
    assert backend.accept_gaps == frozenset({"signals"})


@needs_landlock
@pytest.mark.integration
def test_the_command_starts_with_sigpipe_at_its_default(inside: Path) -> None:
    # yes(1) is killed by SIGPIPE when head exits; with SIGPIPE ignored it
    # would report a write error instead.
    result = LandlockBackend().run(
        ExecRequest("sh", ("-c", "yes | head -n 1; echo ${PIPESTATUS:-done}")),
        writable_roots=[str(inside)],
        cwd=str(inside),
    )
    assert result.stdout == b"y\ndone\n"
    assert result.stderr == b""


@needs_landlock
@pytest.mark.integration
def test_an_exit_by_signal_is_a_negative_exit_code(inside: Path) -> None:
    result = LandlockBackend().run(
        ExecRequest("sh", ("-c", "kill -KILL $$")),
        writable_roots=[str(inside)],
        cwd=str(inside),
    )
    assert result.exit_code == -9


# ---------------------------------------------------------------- process control


def _cgroup_available() -> str:
    try:
        return str(cgroup.delegated_cgroup())
    except OSError:
        return ""


@needs_landlock
def test_the_mechanism_in_use_is_reported_with_its_reason() -> None:
    forced = LandlockBackend(process_control=ProcessControl.SUBREAPER)
    choice = forced.process_control_in_use()
    assert choice.mechanism is ProcessControl.SUBREAPER
    assert "requested" in choice.reason
    auto = LandlockBackend().process_control_in_use()
    where = _cgroup_available()
    if where:
        assert auto.mechanism is ProcessControl.CGROUP
        assert where in auto.reason
    else:
        assert auto.mechanism is ProcessControl.SUBREAPER
        assert "no cgroup v2 leaf" in auto.reason


def _fake_proc(tmp_path: Path, cgroup_file: str, mountinfo: str) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup_file)
    (proc / "mountinfo").write_text(mountinfo)
    return proc


def test_a_host_with_cgroup_v1_only_has_no_delegated_cgroup(tmp_path: Path) -> None:
    proc = _fake_proc(
        tmp_path,
        "4:memory:/user.slice\n1:name=systemd:/user.slice\n",
        "30 25 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
    )
    with pytest.raises(cgroup.CgroupUnavailableError, match="no cgroup v2"):
        cgroup.delegated_cgroup(proc)


def test_a_cgroup2_mount_point_with_escaped_characters_is_found(
    tmp_path: Path,
) -> None:
    mount = tmp_path / "cg root"
    (mount / "app").mkdir(parents=True)
    (mount / "app" / "cgroup.procs").write_text("")
    escaped = str(mount).replace(" ", "\\040")
    proc = _fake_proc(
        tmp_path,
        "0::/app\n",
        f"40 25 0:27 / {escaped} rw,nosuid shared:9 - cgroup2 cgroup2 rw\n",
    )
    assert cgroup.delegated_cgroup(proc) == str(mount / "app")


def test_a_cgroup_outside_the_mounted_subtree_is_not_used(tmp_path: Path) -> None:
    proc = _fake_proc(
        tmp_path,
        "0::/other/app\n",
        f"40 25 0:27 /mine {tmp_path} rw - cgroup2 cgroup2 rw\n",
    )
    with pytest.raises(cgroup.CgroupUnavailableError, match="not mounted here"):
        cgroup.delegated_cgroup(proc)


@pytest.fixture
def nobody_dir() -> Iterator[Path]:
    """A directory the user ``nobody`` owns, on a path it can reach."""
    path = Path(tempfile.mkdtemp(prefix="goatherd-nobody-", dir="/tmp"))
    try:
        os.chown(path, 65534, 65534)
        yield path
    finally:
        shutil.rmtree(path)


# No "&": sh opens /dev/null for a background job, and some hosts keep
# /dev/null closed to unprivileged users; setsid -f forks by itself.
UNPRIVILEGED = """
import sys
from goatherd.application import ExecRequest
from goatherd.infrastructure.sandbox import LandlockBackend
inside = sys.argv[1]
backend = LandlockBackend()
print(backend.process_control_in_use().mechanism.value, flush=True)
script = (
    "setsid -f sh -c 'echo $$ >> pids; while :; do sleep 0.05; done' >log 2>&1 <log;"
    " while [ ! -s pids ]; do sleep 0.01; done; echo started"
)
request = ExecRequest("sh", ("-c", script))
result = backend.run(request, writable_roots=[inside], cwd=inside)
print(result.stdout.decode(), end="")
"""


@needs_landlock
@pytest.mark.integration
@pytest.mark.skipif(
    os.getuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to run a host as an unprivileged user",
)
def test_an_unprivileged_host_without_a_delegated_cgroup_falls_back_to_the_subreaper(
    nobody_dir: Path,
) -> None:
    inside = nobody_dir
    unprivileged = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    result = subprocess.run(
        [*unprivileged, sys.executable, "-c", UNPRIVILEGED, str(inside)],
        capture_output=True,
        cwd="/",
        timeout=120,
        check=False,
    )
    try:
        assert result.returncode == 0, result.stderr.decode()
        assert result.stdout == b"subreaper\nstarted\n"
    finally:
        leftovers = pids_in(inside / "pids")
    assert len(leftovers) == 1
    assert wait_for(lambda: not alive(leftovers[0]), timeout=0.0)


# ---------------------------------------------------------------- launcher's code


def _launcher_overlaps() -> dict[str, str]:
    launch = Path(landlock_sys.__file__).parent
    return {
        "a root holding the Python installation": str(Path(sys.prefix).parent),
        "the launcher's own directory": str(launch),
        "a root holding the launcher": str(launch.parent),
        "the interpreter's directory": str(Path(sys.executable).parent),
    }


@needs_landlock
@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(_launcher_overlaps()))
def test_a_root_overlapping_what_the_launcher_runs_is_refused(
    inside: Path, name: str
) -> None:
    # The launcher runs unconfined on every exec: a command that could change
    # its modules, their bytecode, the interpreter or pyvenv.cfg would run
    # code unconfined at the next exec.
    root = _launcher_overlaps()[name]
    marker = inside / "ran"
    with pytest.raises(ContainmentError, match="overlaps") as caught:
        LandlockBackend().run(
            ExecRequest("touch", (str(marker),)),
            writable_roots=[str(inside), root],
            cwd=str(inside),
        )
    assert "\n" not in str(caught.value)
    assert not marker.exists()


@needs_landlock
@pytest.mark.integration
def test_writable_roots_given_as_one_string_are_refused(inside: Path) -> None:
    with pytest.raises(SandboxError, match="sequence of paths"):
        LandlockBackend().run(
            ExecRequest("true"), writable_roots=str(inside), cwd=str(inside)
        )
