"""A process that materializes a row of intents, to be SIGKILLed at random.

``python -m tests.faults.materialize_worker URL MODE WORLD COUNT`` declares
``COUNT`` effects once (the same append intent on every start), then
materializes them one intent each, in order. A completed intent returns its
stored receipt at once, so a restarted worker resumes where the last one was
killed. An in-doubt intent (at-most-once) is abandoned, as a caller who cannot
tell whether it ran would do. ``MODE`` is:

* ``at_least_once`` / ``at_most_once``: each effect is the exec
  ``sh -c 'echo I >> runs.log'`` in the git repository ``WORLD``, through the
  workspace substrate with that ``exec_delivery`` (confined by Landlock);
* ``exactly_once``: each effect is a put of key ``kI`` to the KV substrate's
  world database ``WORLD/kv.sqlite`` (its triggers count every write).

It prints ``done`` when every intent has a ledger row.
"""

from __future__ import annotations

import sys
from pathlib import Path

from returns.result import Failure

from goatherd.application import (
    InDoubtResolution,
    MaterializationInDoubtError,
    Substrate,
    SubstrateRegistry,
    materialize,
    resolve_in_doubt,
)
from goatherd.domain import (
    AppendBatch,
    AppendContext,
    AppendGroup,
    MaterializationRequest,
    RecordDraft,
    RetainedContextDraft,
)
from goatherd.infrastructure.sandbox import LandlockBackend, new_local_git_sandbox
from goatherd.infrastructure.store import open_trace_store
from goatherd.infrastructure.substrates import SQLiteKVSubstrate, WorkspaceSubstrate

CONTEXT = AppendContext(
    "agent:host", ("trusted:internal",), "shepherd2-slice-a", "internal"
)
MATERIALIZE = CONTEXT.to_operation_context("materialize")
OWNER = "agent:main"


def drafts(mode: str, count: int) -> tuple[str, tuple[RecordDraft, ...]]:
    """The substrate ref and the ``count`` declarations of ``mode``."""
    if mode == "exactly_once":
        return "kv.sqlite.local.v1", tuple(
            RecordDraft(
                "declaration",
                "shepherd2.kv.put.v1",
                {"key": f"k{i}", "value": i},
                "put",
            )
            for i in range(count)
        )
    return "workspace.sandbox.v1", tuple(
        RecordDraft(
            "declaration",
            "workspace.exec.v1",
            {"command": "sh", "args": ["-c", f"echo {i} >> runs.log"]},
            "exec",
        )
        for i in range(count)
    )


def substrate(mode: str, world: Path) -> Substrate:
    """The substrate ``mode`` materializes through."""
    if mode == "exactly_once":
        return SQLiteKVSubstrate(world / "kv.sqlite")
    sandbox = new_local_git_sandbox(world, exec_backend=LandlockBackend())
    return WorkspaceSubstrate(sandbox, exec_delivery=mode)


def main(url: str, mode: str, world: Path, count: int) -> None:
    ref, declarations = drafts(mode, count)
    registry = SubstrateRegistry()
    registry.register(substrate(mode, world))
    with open_trace_store(url) as store:
        group = AppendGroup(
            OWNER, RetainedContextDraft(substrate_ref=ref), (), declarations
        )
        ids = store.append(CONTEXT, AppendBatch("declare", (group,))).fact_ids
        for i, record_id in enumerate(ids):
            request = MaterializationRequest(f"apply:{i}", OWNER, (record_id,))
            result = materialize(store, MATERIALIZE, request, registry)
            if not isinstance(result, Failure):
                continue
            error = result.failure()
            if not isinstance(error, MaterializationInDoubtError):
                raise error
            resolve_in_doubt(
                store, MATERIALIZE, request, InDoubtResolution.ABANDON
            ).unwrap()
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))
