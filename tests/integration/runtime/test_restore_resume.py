"""A restore whose reset landed but whose record did not commit, finished once.

The restore is stopped between its effect and its append: in this process by
a fault hook that fails the append (the store refuses it), or in another
process (a fork of the zygote) by a SIGKILL. The failure must say the effect
landed and carry the ``seq`` that finishes it; the checkpoint stays valid and
claimed by that attempt; ``goatherd restore CKPT --resume SEQ``, run as
another process, re-applies the recorded state and records the restore once.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from returns.result import Failure

from goatherd.domain import (
    CheckpointClaimedError,
    CheckpointRestored,
    CheckpointState,
    EffectLandedError,
    RestoreEffectLandedError,
    ScopeClaimedError,
    TraceStoreError,
)
from goatherd.infrastructure.audit.verify import verify_trace
from tests.integration.runtime.test_claim_race import (
    ACTOR,
    ROOT,
    Actor,
    _checkpointed,
    assert_files_match_trace,
    files,
    manager,
    open_store,
)
from tests.zygote import Zygote, zygote

pytestmark = pytest.mark.integration

CLI = "goatherd"


@pytest.fixture(scope="module")
def forks() -> Iterator[Zygote]:
    with zygote([ACTOR, "goatherd.cli"]) as started:
        yield started


def goatherd(forks: Zygote, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI as another process (a fork of the zygote)."""
    return subprocess.run(
        forks.command(CLI, *argv),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def restored_records(store, cp: str) -> int:
    return len(
        {
            e.record.record_id
            for e in store.read_log(-1, 100_000)
            if e.record.envelope.schema_ref == CheckpointRestored.SCHEMA
            and e.record.payload.get("checkpoint_id") == cp
        }
    )


def refuse_the_record(boundary: str, intent: str) -> None:
    """Fail the restore's own append (not its claim): the reset has landed."""
    if boundary == "before-commit" and ":restore:" in intent and ":claim" not in intent:
        raise TraceStoreError("disk full")


def assert_finished(trace: str, repo: Path, where: Path, cp: str, owner: str) -> None:
    with open_store(trace) as store:
        mgr = manager(store, repo)
        mgr.context.model.refresh()
        assert mgr.context.model.checkpoint(cp).state is CheckpointState.USED
        restored = files(where)
        assert restored["base.txt"] == b"base\n"
        assert "junk.txt" not in restored
        assert restored_records(store, cp) == 1
        assert_files_match_trace(mgr, store, owner)
        assert verify_trace(store).ok


@pytest.mark.parametrize("owner", ["agent:main", "agent:try"])
def test_a_restore_whose_record_fails_after_the_reset_says_so_with_its_seq(
    trace, tmp_path, forks, owner
):
    repo, where, cp = _checkpointed(trace, tmp_path, owner)
    with open_store(trace) as store:
        mgr = manager(store, repo, refuse_the_record)
        result = mgr.restore_checkpoint(cp, seq=5)
        assert isinstance(result, Failure)
        landed = result.failure()
        assert isinstance(landed, RestoreEffectLandedError)
        assert isinstance(landed, EffectLandedError)  # one hierarchy with settle
        assert (landed.checkpoint_id, landed.seq, landed.cause) == (cp, 5, "disk full")
        assert str(landed) == (
            f"restore {cp} onto scope:{owner}: restore effect landed: the workspace"
            " is reset to the checkpoint but the restore was not recorded"
            " (disk full); finish it with seq=5 (restore again under that seq)"
        )
        checkpoint = mgr.context.model.checkpoint(cp)
        assert checkpoint.state is CheckpointState.VALID  # not burnt
        assert checkpoint.claimed_by == "5"
        # Another attempt cannot take it over.
        other = manager(store, repo).restore_checkpoint(cp, seq=6)
        assert isinstance(other, Failure)
        assert isinstance(other.failure(), CheckpointClaimedError)
    (where / "junk.txt").write_bytes(b"junk again\n")  # drift after the landing
    done = goatherd(forks, "restore", cp, "--resume", "5", "--db", trace)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"restored {cp} onto scope:{owner}")
    assert_finished(trace, repo, where, cp, owner)


@pytest.mark.parametrize("owner", ["agent:main", "agent:try"])
def test_a_restore_killed_between_its_reset_and_its_record_is_finished_by_the_cli(
    trace, tmp_path, forks, owner
):
    repo, where, cp = _checkpointed(trace, tmp_path, owner)
    kill = {"ACTOR_KILL_AT": "after-effect", "ACTOR_KILL_INTENT": ":restore:"}
    assert Actor(forks, trace, repo)("restore", cp, "5", env=kill) == "Killed"
    with open_store(trace) as store:
        model = manager(store, repo).context.model
        model.refresh()
        assert model.checkpoint(cp).claimed_by == "5"
        assert restored_records(store, cp) == 0
        halted = manager(store, repo).halt("scope:" + owner)  # refused, naming
        assert isinstance(halted, Failure)  # the command that finishes the claim
        refused_halt = halted.failure()
        assert isinstance(refused_halt, ScopeClaimedError)
        assert refused_halt.finish == f"goatherd restore {cp} --resume 5"
        assert (refused_halt.kind, refused_halt.seq) == ("checkpoint", 5)
    refused = goatherd(forks, "restore", cp, "--db", trace)  # a fresh attempt
    assert refused.returncode != 0
    assert "claimed" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    done = goatherd(forks, "restore", cp, "--resume", "5", "--db", trace)
    assert done.returncode == 0, done.stderr
    assert_finished(trace, repo, where, cp, owner)
    # The same resume again returns the recorded outcome and records nothing.
    again = goatherd(forks, "restore", cp, "--resume", "5", "--db", trace)
    assert again.returncode == 0, again.stderr
    assert "already" in again.stdout
    assert_finished(trace, repo, where, cp, owner)
