"""The Python API reads like the seed's examples and fails at once when misused.

Each test is one thing a user translating the seed's examples tripped over:
where the errors live, a constructor given the wrong thing, what ``help()``
says a command returns, a read that needs an argument the seed defaults, an
``isinstance`` check on a port, a file name with ``?`` or ``#``, a bare string
where a collection is expected, and ``fork_isolated`` leaving the child at
``HEAD``.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest
from returns.result import Success

import goatherd
import goatherd.errors
from goatherd import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
    ScopeManager,
)
from goatherd.application import EchoSubstrate, Sandbox
from goatherd.domain import DestructivePathReviewer
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import (
    SQLiteTraceStore,
    open_trace_store_read_only,
)
from tests.imports import modules_after
from tests.integration.runtime.support import make_repo, root_sandbox, worktree

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (
    "goatherd.domain",
    "goatherd.projections",
    "goatherd.application",
    "goatherd.infrastructure",
    "goatherd.integrations.langgraph",
    "goatherd.integrations.mcp",
)


def _exported_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for source in SOURCES:
        module = importlib.import_module(source)
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, BaseException):
                found[name] = value
    return found


def test_every_public_exception_is_in_goatherd_errors_under_one_root() -> None:
    exported = _exported_exceptions()
    assert len(exported) > 90
    assert sorted(goatherd.errors.__all__) == sorted(exported)
    for name, cls in exported.items():
        assert getattr(goatherd.errors, name) is cls
        assert issubclass(cls, goatherd.errors.GoatherdError), name


def test_the_errors_the_issue_names_are_importable_from_one_place() -> None:
    from goatherd.errors import (
        ApplyConflictError,
        OutputConsumedError,
        ProjectionModeError,
    )

    # ...and the common ones from the facade itself.
    assert goatherd.ApplyConflictError is ApplyConflictError
    assert goatherd.OutputConsumedError is OutputConsumedError
    assert issubclass(ProjectionModeError, goatherd.ProjectionError)
    assert issubclass(goatherd.SettleEffectLandedError, goatherd.RuntimeRuleError)


def test_importing_goatherd_errors_loads_no_layer_or_sdk() -> None:
    loaded = modules_after("import goatherd.errors")
    heavy = {"sqlalchemy", "mcp", "langgraph", "starlette", "psycopg"}
    assert not {m.split(".")[0] for m in loaded} & heavy
    assert not any(m.startswith("goatherd.infrastructure") for m in loaded)


def test_an_unknown_name_in_goatherd_errors_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchError'"):
        _ = goatherd.errors.NoSuchError  # type: ignore[attr-defined]


def test_a_scope_manager_given_a_store_names_the_entry_point(tmp_path: Path) -> None:
    with (
        SQLiteTraceStore(tmp_path / "t.sqlite") as store,
        pytest.raises(TypeError) as caught,
    ):
        ScopeManager(store)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "not SQLiteTraceStore" in message
    assert "goatherd.scope_manager_for(store)" in message


@pytest.mark.parametrize(
    ("method", "failure"),
    [
        ("settle", "SettleFailure"),
        ("halt", "HaltFailure"),
        ("inject", "FactFailure"),
        ("append_fact", "FactFailure"),
        ("propose_merge", "ProposeFailure"),
        ("record_merge_decision", "RecordFailure"),
        ("merge_or_discard", "LifecycleFailure"),
        ("capture_workspace", "WorkspaceFailure"),
        ("apply_workspace", "WorkspaceFailure"),
        ("diff_workspace", "WorkspaceFailure"),
        ("destroy_scope_sandbox", "HaltFailure"),
    ],
)
def test_help_shows_the_result_a_command_returns(method: str, failure: str) -> None:
    shown = inspect.signature(getattr(ScopeManager, method)).return_annotation
    assert isinstance(shown, str)
    assert shown.startswith("Result[")
    assert shown.endswith(f", {failure}]")


def test_no_public_scope_manager_command_claims_to_return_none_alone() -> None:
    import pydoc

    text = pydoc.render_doc(ScopeManager, renderer=pydoc.plaintext)  # type: ignore[attr-defined]
    for name in ("settle", "halt", "propose_merge", "apply_workspace"):
        lines = [li.lstrip(" |") for li in text.splitlines()]
        line = next(li for li in lines if li.startswith(name + "("))
        assert "-> 'Result[" in line, line


def test_the_result_a_command_returns_is_still_a_result(tmp_path: Path) -> None:
    with SQLiteTraceStore(tmp_path / "t.sqlite") as store:
        manager = scope_manager_for(store)
        root = manager.create("agent:main").unwrap()
        halted = manager.halt(root.id)
        assert halted == Success(None)


def test_read_owner_prefix_reads_the_whole_path_by_default(tmp_path: Path) -> None:
    with SQLiteTraceStore(tmp_path / "t.sqlite") as store:
        drafts = tuple(
            RecordDraft("capture", "tool.call.v1", {"n": n}, kind_label="call")
            for n in range(3)
        )
        store.append(
            TRUSTED_APPEND_CONTEXT,
            AppendBatch("i-1", (AppendGroup("agent:main", fact_drafts=drafts),)),
        )
        whole = store.read_owner_prefix(TRUSTED_READ_CONTEXT, "agent:main")
        two = store.read_owner_prefix(TRUSTED_READ_CONTEXT, "agent:main", 1)
    assert len(whole.owner_paths["agent:main"]) == 3
    assert len(two.owner_paths["agent:main"]) == 2


def test_ports_are_runtime_checkable() -> None:
    sandbox = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"a\n"}))
    assert isinstance(sandbox, Sandbox)
    assert not isinstance(object(), Sandbox)
    assert isinstance(SQLiteTraceStore(":memory:"), goatherd.TraceStore)


@pytest.mark.parametrize("name", ["we?ird#name.sqlite", "a#b.sqlite", "q?.sqlite"])
def test_a_sqlite_path_with_question_mark_or_hash_is_that_file(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    with SQLiteTraceStore(path) as store:
        draft = RecordDraft("capture", "tool.call.v1", {"n": 1}, kind_label="call")
        store.append(
            TRUSTED_APPEND_CONTEXT,
            AppendBatch("i-1", (AppendGroup("agent:main", fact_drafts=(draft,)),)),
        )
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".sqlite") == [name]
    with SQLiteTraceStore(path) as again:
        assert again.head("agent:main") == 1
    with open_trace_store_read_only(str(path)) as ro:
        assert ro.head("agent:main") == 1


def test_echo_substrate_refuses_the_seeds_bare_string() -> None:
    with pytest.raises(TypeError) as caught:
        EchoSubstrate("my.echo.v1", "example.write.v1")
    assert "('example.write.v1',)" in str(caught.value)
    echo = EchoSubstrate("my.echo.v1", ("example.write.v1",))
    assert echo.declaration_schemas == frozenset({"example.write.v1"})
    with pytest.raises(TypeError, match="strings only"):
        EchoSubstrate("my.echo.v1", ["ok.v1", 3])  # type: ignore[list-item]


def test_other_collections_of_names_refuse_a_bare_string() -> None:
    with pytest.raises(TypeError, match="DestructivePathReviewer patterns"):
        DestructivePathReviewer("*.pem")  # type: ignore[arg-type]


APPLIED = "goatherd.workspace.applied.v1"


def _schemas(store: SQLiteTraceStore, owner: str) -> list[str]:
    path = store.read_owner_prefix(TRUSTED_READ_CONTEXT, owner)
    return [
        path.facts_by_id[i].envelope.schema_ref for i in path.owner_paths.get(owner, ())
    ]


@pytest.mark.integration
def test_fork_isolated_gives_the_child_the_parents_uncommitted_tree(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"app.py": b"v1\n"})
    (repo / "app.py").write_bytes(b"v2, not committed\n")
    (repo / "new.txt").write_bytes(b"untracked\n")
    with SQLiteTraceStore(tmp_path / "t.sqlite") as store:
        manager = scope_manager_for(store)
        root = manager.create("agent:main", root_sandbox(repo)).unwrap()
        seeded = worktree(repo, tmp_path / "seeded")
        child = manager.fork_isolated(root.id, "agent:main:a", None, seeded).unwrap()
        assert (tmp_path / "seeded" / "app.py").read_bytes() == b"v2, not committed\n"
        assert (tmp_path / "seeded" / "new.txt").read_bytes() == b"untracked\n"
        assert APPLIED in _schemas(store, child.owner_id)
        clean = worktree(repo, tmp_path / "clean")
        bare = manager.fork_isolated(
            root.id, "agent:main:b", None, clean, clean=True
        ).unwrap()
        assert (tmp_path / "clean" / "app.py").read_bytes() == b"v1\n"
        assert not (tmp_path / "clean" / "new.txt").exists()
        assert APPLIED not in _schemas(store, bare.owner_id)
        # The handle's fork_isolated does the same.
        third = worktree(repo, tmp_path / "third")
        root.fork_isolated("agent:main:c", None, third).unwrap()
        assert (tmp_path / "third" / "app.py").read_bytes() == b"v2, not committed\n"
