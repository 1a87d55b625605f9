"""The environment tools: open, list, checkpoint, restore, diff, propose.

``EnvironmentTools`` opens (or resumes) and lists environments on the root
path, checkpoints and restores an environment's worktree, shows its diff
against its base, proposes it as an output for a human to settle, and serves
the records and diff resources (which record nothing). Imports
``tool_calls``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Final, cast

from goatherd.application import RetainedOutput
from goatherd.domain import GoatherdError, OutputState
from goatherd.integrations.mcp.environments import Environment, unwrap
from goatherd.integrations.mcp.errors import (
    EnvironmentUnavailableError,
    ToolInputError,
    ToolRefusedError,
)
from goatherd.integrations.mcp.files import shown_name
from goatherd.integrations.mcp.recording import bounded_text, text_fields
from goatherd.integrations.mcp.tool_calls import (
    _STOPPING,
    ToolCalls,
    ToolReply,
    _count,
    _Done,
    _text,
)

__all__ = [
    "EnvironmentTools",
    "MAX_DIFF_BYTES",
    "MAX_RECENT_RECORDS",
]

MAX_DIFF_BYTES: Final = 256 * 1024
MAX_RECENT_RECORDS: Final = 200


class EnvironmentTools(ToolCalls):
    """The tools over an environment's life, from opening to a proposal."""

    # ------------------------------------------------------------ environments

    def open_environment(
        self,
        name: str | None = None,
        environment_id: str | None = None,
        client: Mapping[str, str] | None = None,
    ) -> ToolReply:
        """Open a new environment forked from the repository, or resume one."""
        who = dict(client or {})
        if environment_id is not None:
            return self._call(
                environment_id,
                "open_environment",
                {"resume": True, "client": who},
                lambda env: self._opened(env, resumed=True),
            )
        if name is not None:
            _text(name, "name", limit=256)
        env_id = self.environments.new_id(name)
        root = self.environments.root_owner
        args = {"environment_id": env_id, "name": name, "client": who}
        call = self._recorder.declare(root, "open_environment", args)
        stopped, guidance = self._root_gate(call)
        if stopped is not None:
            return stopped
        try:
            env = self.environments.create(env_id)
        except (GoatherdError, OSError) as error:
            message = f"could not open an environment: {error}"
            outcome = {"success": False, "error": message}
            self._recorder.capture(root, call.record_id, call.tool, outcome)
            return ToolReply(message, {"error": message}, True, guidance)
        done = self._opened(env, resumed=False)
        self._recorder.capture(
            env.owner, call.record_id, call.tool, {"success": True, **done.record}
        )
        return ToolReply(done.text, done.data, False, guidance)

    def list_environments(self) -> ToolReply:
        """List the repository's environments and their outputs.

        Recorded on the repository's root path (it names no environment).
        """
        root = self.environments.root_owner
        call = self._recorder.declare(root, "list_environments", {})
        stopped, guidance = self._root_gate(call)
        if stopped is not None:
            return stopped
        infos = [info.as_dict() for info in self.environments.infos()]
        self._recorder.capture(
            root, call.record_id, call.tool, {"success": True, "count": len(infos)}
        )
        return ToolReply(_listing(infos), {"environments": infos}, False, guidance)

    # ------------------------------------------------------------ checkpoints

    def checkpoint(
        self, environment_id: str, conversation: str | None = None, label: str = ""
    ) -> ToolReply:
        """Checkpoint the worktree, with an optional conversation snapshot."""
        snapshot = (
            _text(conversation, "conversation") if conversation is not None else ""
        )
        _text(label, "label", limit=1024)
        args = {"label": label, **text_fields("conversation", snapshot)}

        def body(env: Environment) -> _Done:
            manager = self.environments.manager
            cp = unwrap(
                manager.create_checkpoint(env.scope_id, snapshot.encode("utf-8"))
            )
            data = {"checkpoint_id": cp.id, "label": label}
            text = f"checkpoint {cp.id} taken; restore rolls back to it, once"
            return _Done(text, data, data)

        return self._call(environment_id, "checkpoint", args, body)

    def restore(self, environment_id: str, checkpoint_id: str) -> ToolReply:
        """Restore a checkpoint of this environment (once); return its conversation."""
        _text(checkpoint_id, "checkpoint_id", limit=1024)
        args = {"checkpoint_id": checkpoint_id}

        def body(env: Environment) -> _Done:
            manager = self.environments.manager
            found = manager.checkpoint(checkpoint_id)
            if found is None:
                raise ToolInputError(f"no checkpoint {checkpoint_id!r}")
            if found.scope_id != env.scope_id:
                raise ToolInputError(
                    f"checkpoint {checkpoint_id!r} belongs to another environment"
                )
            snapshot = unwrap(manager.restore_checkpoint(checkpoint_id))
            conversation = snapshot.decode("utf-8", errors="replace")
            data = {"checkpoint_id": checkpoint_id, "conversation": conversation}
            text = f"restored {checkpoint_id}; the worktree is as it was then."
            if conversation:
                text += f"\nconversation snapshot:\n{conversation}"
            return _Done(text, data, {"checkpoint_id": checkpoint_id})

        return self._call(environment_id, "restore", args, body)

    # ------------------------------------------------------------ review

    def diff(self, environment_id: str, max_lines: int = 2000) -> ToolReply:
        """Return the worktree's unified diff against its base (the fork)."""
        lines = _count(max_lines, "max_lines", 1, 100_000)

        def body(env: Environment) -> _Done:
            text, files = self._diff(env, lines)
            data = {"diff": text, "files": files}
            record = {"files": files[:500], **text_fields("diff", text)}
            return _Done(text or "no changes against the base", data, record)

        return self._call(environment_id, "diff", {"max_lines": lines}, body)

    def _diff(self, env: Environment, max_lines: int) -> tuple[str, list[str]]:
        manager = self.environments.manager
        scope = manager.get(env.scope_id)
        baseline = scope.baseline() if scope is not None else None
        if baseline is None:
            raise EnvironmentUnavailableError(f"environment {env.env_id} has no base")
        text, files = unwrap(manager.diff_workspace(env.scope_id, baseline, max_lines))
        data = text.encode("utf-8")
        if len(data) > MAX_DIFF_BYTES:
            cut = data[:MAX_DIFF_BYTES].decode("utf-8", errors="ignore")
            text = f"{cut}\n[... diff cut at {MAX_DIFF_BYTES} bytes]\n"
        return text, [shown_name(name) for name in files]

    def propose(self, environment_id: str, summary: str = "") -> ToolReply:
        """Seal the environment as an output for a human to settle."""
        _text(summary, "summary", limit=64 * 1024)
        args = text_fields("summary", summary)

        def body(env: Environment) -> _Done:
            manager = self.environments.manager
            standing = self._unchanged_proposal(env)
            if standing is not None:
                return self._proposed(standing, again=True)
            proposal = unwrap(manager.propose_merge(env.scope_id, 1))
            _proposable(proposal.paths)
            self._fired.rule = ""
            verdict = self.supervisor.review_merge(env.scope_id, proposal)
            if verdict is not None and verdict.type in _STOPPING:
                raise ToolRefusedError(
                    f"the supervisor denied the proposal (rule {self._fired.rule}):"
                    f" {verdict.payload}"
                )
            return self._proposed(unwrap(manager.seal(env.scope_id)), again=False)

        return self._call(environment_id, "propose", args, body)

    def _unchanged_proposal(self, env: Environment) -> RetainedOutput | None:
        """The environment's latest unsettled output, if the worktree still holds it."""
        outputs = self.environments.manager.outputs_for_scope(env.scope_id)
        if not outputs or outputs[-1].state is not OutputState.UNCONSUMED:
            return None
        latest = outputs[-1]
        current = self.environments.sandbox_of(env).capture()
        return latest if current.digest() == latest.workspace().digest() else None

    def _proposed(self, out: RetainedOutput, *, again: bool) -> _Done:
        changes = [dict(change) for change in out.changes()]
        settle = f"goatherd settle {out.id} select --db {self._settings.db}"
        commit = f"goatherd settle {out.id} select --commit --db {self._settings.db}"
        data = {
            "output_id": out.id,
            "changes": changes,
            "settle": settle,
            "settle_commit": commit,
            "unchanged": again,
        }
        if again:
            text = (
                f"nothing changed since {out.id} was proposed; it stands"
                f" ({len(changes)} changed path(s)), e.g. `{settle}`"
            )
        else:
            text = (
                f"proposed as {out.id} ({len(changes)} changed path(s)); a human"
                f" settles it, e.g. `{settle}` (or as a git commit on the"
                f" repository's branch: `{commit}`). You may keep working and propose"
                " again; a human settles one proposal of an environment, and the"
                " others then can no longer be selected or applied."
            )
        record = {"output_id": out.id, "changes": changes[:500], "unchanged": again}
        return _Done(text, data, record)

    # ------------------------------------------------------------ resources

    def recent_records(self, environment_id: str, limit: int = 50) -> str:
        """Return the environment's latest path entries as JSON (records nothing)."""
        count = _count(limit, "limit", 1, MAX_RECENT_RECORDS)
        owner = self.environments.owner_of(environment_id)
        self.environments.known(owner)
        head = self._store.head(owner)
        entries = self._store.read_path(owner, max(-1, head - count - 1))
        rows = [
            {
                "ordinal": entry.record.owner_ordinal,
                "position": entry.position,
                "record_id": entry.record.record_id,
                "mode": entry.record.envelope.mode,
                "schema": entry.record.envelope.schema_ref,
                "kind": entry.record.fact_kind,
                "payload": _shown(entry.record.payload),
            }
            for entry in entries
        ]
        return json.dumps(
            {"environment_id": owner.rsplit(":", 1)[1], "records": rows}, indent=1
        )

    def diff_text(self, environment_id: str) -> str:
        """Return the environment's diff against its base (records nothing)."""
        env = self.environments.lookup(environment_id)
        with self.environments.lock(env.owner):
            text, _ = self._diff(env, 0)
        return text


def _listing(infos: list[dict[str, object]]) -> str:
    lines = []
    for info in infos:
        outputs = cast("list[dict[str, str]]", info["outputs"])
        line = f"{info['environment_id']}: {info['state']}"
        lines.extend(
            [line + "".join(f", {o['output_id']} {o['state']}" for o in outputs)]
        )
    return "\n".join(lines) or "no environments yet"


def _proposable(paths: Iterable[str]) -> None:
    """Refuse a proposal with a file name the trace cannot hold as text."""
    for path in paths:
        shown = shown_name(path)
        if shown != path:
            named = shown if shown.isprintable() else repr(shown)
            raise ToolInputError(
                f"the file name {named} is not valid UTF-8, so it cannot be"
                " proposed: rename or remove it first"
            )


def _shown(payload: Mapping[str, object]) -> object:
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    if len(text) <= 4096:
        return payload
    return {"truncated": bounded_text(text, 4096)}
