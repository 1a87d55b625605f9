"""The ids people type: exact ids, unique prefixes and environment ids (ADR 0085).

Every CLI argument that names something in the trace goes through one of
three resolvers:

- :func:`resolve` for scopes, outputs and checkpoints, against the runtime
  model the command has folded already (no second read);
- :func:`resolve_record` for record ids, by a primary-key range read;
- :func:`resolve_owner` for owner paths, task executions and cut ids, and
  :func:`resolve_cut` for cut ids.

What a typed argument may be, tried in this order:

1. the exact id, with or without its type prefix (``out:``, ``scope:``,
   ``cp:``, ``sha256:``);
2. a scope, named by its id, its owner path or its *environment id*: the
   last ``:``-segment of a child scope's owner (the MCP server's
   ``env-1a2b3c4d``, or ``try-0`` of ``agent:main:try-0``). For a scope
   argument that is the scope; for an output argument its single unconsumed
   output; for a checkpoint argument its single valid checkpoint;
3. a unique prefix of the id, with or without the type prefix (a prefix
   of one scope's owner path names that scope, not its outputs);
4. for outputs and checkpoints, a unique suffix of the numeric tail
   (``9474`` of ``out:...:17120361952890889474``).

Several matches refuse with exit code 2 (a usage error), listing up to
:data:`MAX_CANDIDATES` of them; no match refuses with exit code 1 and names
the command that lists what there is. Stdlib only at the top: the store and
the model come in as arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from goatherd.cli.exits import EXIT_FAILED, EXIT_USAGE, CommandError

if TYPE_CHECKING:
    from goatherd.application.runtime_model import RuntimeModel
    from goatherd.infrastructure.store import SqlAlchemyTraceStore

__all__ = [
    "AmbiguousIdError",
    "CHECKPOINT",
    "Candidate",
    "MAX_CANDIDATES",
    "OUTPUT",
    "SCOPE",
    "UnknownIdError",
    "candidates",
    "log_owner",
    "resolve",
    "resolve_cut",
    "resolve_owner",
    "resolve_record",
]

SCOPE: Final = "scope"
OUTPUT: Final = "output"
CHECKPOINT: Final = "checkpoint"
PREFIXES: Final = {SCOPE: "scope:", OUTPUT: "out:", CHECKPOINT: "cp:"}
RECORD_PREFIX: Final = "sha256:"
MAX_CANDIDATES: Final = 10
"""At most this many candidates are listed when a typed id is ambiguous."""
_LIST_SCOPES: Final = "`goatherd scopes`"
_LIST_LOG: Final = "`goatherd log`"
_PLURAL: Final = {SCOPE: "scopes", OUTPUT: "outputs", CHECKPOINT: "checkpoints"}


class AmbiguousIdError(CommandError):
    """A typed id matches several things (exit code 2).

    Attributes:
        candidates: the ids it matches (at most ``MAX_CANDIDATES + 1``).
    """

    def __init__(self, message: str, candidates: Sequence[str]) -> None:
        """Keep the message and the candidates; exit with the usage code."""
        super().__init__(message, EXIT_USAGE)
        self.candidates = tuple(candidates)


class UnknownIdError(CommandError, LookupError):
    """A typed id matches nothing in the trace (exit code 1)."""

    def __init__(self, message: str) -> None:
        """Keep the message; exit with the failure code."""
        super().__init__(message, EXIT_FAILED)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One scope, output or checkpoint a typed id may name.

    Attributes:
        id: the full id (``scope:...``, ``out:...``, ``cp:...``).
        kind: :data:`SCOPE`, :data:`OUTPUT` or :data:`CHECKPOINT`.
        owner: the owner path of its scope.
        open: whether it can still be used: an active scope, an unconsumed
            output, a valid checkpoint.
        child: whether its scope has a parent (only children have
            environment ids).
    """

    id: str
    kind: str
    owner: str
    open: bool
    child: bool = False

    @property
    def bare(self) -> str:
        """The id without its type prefix."""
        return self.id.removeprefix(PREFIXES[self.kind])


def candidates(model: RuntimeModel) -> list[Candidate]:
    """Return every scope, output and checkpoint the folded model lists."""
    from goatherd.domain.checkpoint import CheckpointState
    from goatherd.domain.scope import ScopeState
    from goatherd.domain.settlement import OutputState

    found = [
        Candidate(
            s.scope_id,
            SCOPE,
            s.owner,
            s.state is ScopeState.ACTIVE,
            s.parent_owner is not None,
        )
        for s in model.scopes()
        if s.listed and not s.pruned
    ]
    found += [
        Candidate(o.output_id, OUTPUT, o.scope_owner, o.state is OutputState.UNCONSUMED)
        for o in model.outputs()
        if o.exists
    ]
    found += [
        Candidate(
            c.checkpoint_id,
            CHECKPOINT,
            c.scope_owner,
            c.state is CheckpointState.VALID,
        )
        for c in model.checkpoints()
        if c.exists and not c.pruned
    ]
    return found


def _listed(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:MAX_CANDIDATES])
    more = len(ids) - MAX_CANDIDATES
    return f"{shown} and {more} more" if more > 0 else shown


def _what(kinds: Sequence[str]) -> str:
    return " or ".join(kinds)


def _one(text: str, kinds: Sequence[str], found: Sequence[Candidate]) -> Candidate:
    """Return the single match, or refuse several listing them."""
    if len(found) == 1:
        return found[0]
    ids = sorted(c.id for c in found)
    raise AmbiguousIdError(
        f"{text!r} is ambiguous: it matches {len(ids)} {_plural(found)}: "
        f"{_listed(ids)}; type more of the id ({_LIST_SCOPES} lists them)",
        ids,
    )


def _plural(found: Sequence[Candidate]) -> str:
    kinds = sorted({c.kind for c in found})
    if len(kinds) == 1:
        return _PLURAL[kinds[0]]
    return " or ".join(_PLURAL[k] for k in kinds)


def _designated_scopes(text: str, scopes: Iterable[Candidate]) -> list[Candidate]:
    """The scopes ``text`` names by id, owner path or environment id."""
    listed = list(scopes)
    exact = [s for s in listed if text in (s.id, s.owner)]
    if exact or ":" in text:
        return exact
    return [s for s in listed if s.child and s.owner.rpartition(":")[2] == text]


def _of_scope(
    text: str, kind: str, scopes: Sequence[Candidate], pool: Sequence[Candidate]
) -> Candidate:
    """Return the single open output or checkpoint of the scope ``text`` named."""
    if len(scopes) > 1:
        _one(text, (SCOPE,), scopes)
    scope = scopes[0]
    mine = [c for c in pool if c.kind == kind and c.owner == scope.owner]
    usable = [c for c in mine if c.open]
    state = "unconsumed" if kind == OUTPUT else "valid"
    if len(usable) == 1:
        return usable[0]
    if not usable:
        had = f" (its {_PLURAL[kind]}: {_listed([c.id for c in mine])})" if mine else ""
        raise UnknownIdError(
            f"{scope.id} has no {state} {kind}{had}; {_LIST_SCOPES} lists them"
        )
    ids = [c.id for c in usable]
    raise AmbiguousIdError(
        f"{scope.id} has {len(ids)} {state} {_PLURAL[kind]}: {_listed(ids)};"
        f" name one of them ({_LIST_SCOPES} lists them)",
        ids,
    )


def _scope_first(found: list[Candidate]) -> list[Candidate]:
    """A prefix of one scope's owner names that scope, not its own outputs.

    ``mcp:project:env-1a`` starts the scope and its outputs alike; when every
    other match belongs to the one scope matched, the scope is meant.
    """
    scopes = [c for c in found if c.kind == SCOPE]
    if len(scopes) == 1 and all(c.owner == scopes[0].owner for c in found):
        return scopes
    return found


def resolve(text: str, pool: Sequence[Candidate], kinds: Sequence[str]) -> Candidate:
    """Return the one scope, output or checkpoint of ``kinds`` that ``text`` names.

    ``pool`` is :func:`candidates` of the command's model; ``kinds`` what
    the argument may be, in the order an environment id prefers them.

    Raises:
        AmbiguousIdError: several match (exit 2), listed in the message.
        UnknownIdError: nothing matches (exit 1); the message names the
            listing command.
    """
    typed = text.strip()
    wanted = [c for c in pool if c.kind in kinds]
    exact = [c for c in wanted if typed in (c.id, c.bare)]
    if exact:
        return _one(typed, kinds, exact)
    scopes = _designated_scopes(typed, (c for c in pool if c.kind == SCOPE))
    if scopes:
        if SCOPE in kinds:
            return _one(typed, kinds, scopes)
        return _of_scope(typed, kinds[0], scopes, pool)
    if typed:
        prefixed = [
            c for c in wanted if c.id.startswith(typed) or c.bare.startswith(typed)
        ]
        if prefixed:
            return _one(typed, kinds, _scope_first(prefixed))
    if typed.isdigit():
        tails = [
            c
            for c in wanted
            if c.kind != SCOPE and c.id.rpartition(":")[2].endswith(typed)
        ]
        if tails:
            return _one(typed, kinds, tails)
    raise UnknownIdError(
        f"no {_what(kinds)} matches {text!r}; list them with {_LIST_SCOPES}"
    )


# ---------------------------------------------------------------- records


def resolve_record(store: SqlAlchemyTraceStore, text: str) -> str:
    """Return the record id ``text`` names: the id or a unique hex prefix.

    Raises:
        AmbiguousIdError: several records start so (exit 2).
        UnknownIdError: none does (exit 1).
    """
    from goatherd.infrastructure.audit.inspection import matching_ids

    typed = text.strip()
    bare = typed.removeprefix(RECORD_PREFIX).lower()
    if bare and all(ch in "0123456789abcdef" for ch in bare):
        found = matching_ids(store, "record", RECORD_PREFIX + bare, MAX_CANDIDATES + 1)
    else:
        found = []
    if len(found) == 1:
        return found[0]
    if found:
        raise AmbiguousIdError(
            f"{text!r} is ambiguous: it starts {_count(found)} record ids:"
            f" {_listed(found)}; type more of the id ({_LIST_LOG} lists them)",
            found,
        )
    raise UnknownIdError(f"no record matches {text!r}; list them with {_LIST_LOG}")


def _count(found: Sequence[str]) -> str:
    return (
        f"more than {MAX_CANDIDATES}"
        if len(found) > MAX_CANDIDATES
        else str(len(found))
    )


# ---------------------------------------------------------------- owners


def resolve_owner(
    store: SqlAlchemyTraceStore, text: str, *, cuts: bool = False
) -> tuple[str, str]:
    """Return ``(kind, id)``: the owner path (or cut id) ``text`` names.

    ``kind`` is ``"owner"`` or, with ``cuts``, ``"cut"``. Accepted: an exact
    cut id or owner path (a task execution's id is its owner path), a scope
    id (``scope:<owner>``), an environment id (the last segment of exactly
    one owner path), a unique prefix of an owner path or cut id.

    Raises:
        AmbiguousIdError: several match (exit 2).
        UnknownIdError: none does (exit 1).
    """
    from goatherd.infrastructure.audit.inspection import matching_ids

    typed = text.strip()
    limit = MAX_CANDIDATES + 1
    if cuts and typed and matching_ids(store, "cut", typed, 1) == [typed]:
        return "cut", typed
    owner = typed.removeprefix(PREFIXES[SCOPE])
    if owner and store.head(owner) > 0:
        return "owner", owner
    found: list[tuple[str, str]] = []
    if typed and ":" not in typed:
        found = [
            ("owner", o) for o in matching_ids(store, "owner", "", limit, segment=typed)
        ]
    if not found and owner:
        found = [("owner", o) for o in matching_ids(store, "owner", owner, limit)]
        if cuts:
            found += [("cut", c) for c in matching_ids(store, "cut", typed, limit)]
    if len(found) == 1:
        return found[0]
    what = "owner paths or cut ids" if cuts else "owner paths"
    if found:
        ids = sorted(value for _, value in found)
        raise AmbiguousIdError(
            f"{text!r} is ambiguous: it matches {_count(ids)} {what}:"
            f" {_listed(ids)}; type more of it ({_LIST_LOG} lists the owners)",
            ids,
        )
    raise UnknownIdError(
        f"{text!r} is neither {'a cut id nor ' if cuts else ''}an owner path in"
        f" this trace; list the owner paths with {_LIST_LOG}"
    )


def resolve_cut(store: SqlAlchemyTraceStore, text: str) -> str:
    """Return the cut id ``text`` names: the id or a unique prefix of one.

    A prefix of no cut is returned as typed: the store refuses it naming it.

    Raises:
        AmbiguousIdError: several cut ids start so (exit 2).
    """
    from goatherd.infrastructure.audit.inspection import matching_ids

    typed = text.strip()
    found = matching_ids(store, "cut", typed, MAX_CANDIDATES + 1) if typed else []
    if typed in found or not found:
        return typed
    if len(found) == 1:
        return found[0]
    raise AmbiguousIdError(
        f"{text!r} is ambiguous: it starts {_count(found)} cut ids:"
        f" {_listed(found)}; type more of it",
        found,
    )


def log_owner(store: SqlAlchemyTraceStore, text: str | None) -> str | None:
    """Return the owner ``log --owner`` filters on.

    ``--owner`` filters on a subtree, possibly one not written yet (``log
    --follow``), so only a scope id (``scope:<owner>``) and an environment id
    that names exactly one owner path are translated; anything else is used
    as typed.
    """
    from goatherd.infrastructure.audit.inspection import matching_ids

    if text is None:
        return None
    if text.startswith(PREFIXES[SCOPE]):
        return text.removeprefix(PREFIXES[SCOPE])
    if text and ":" not in text and store.head(text) == 0:
        found = matching_ids(store, "owner", "", 2, segment=text)
        if len(found) == 1:
            return found[0]
    return text
