"""The seed's "Supervise sub-agents" and "Review before merge" examples, for real.

A :class:`goatherd.Supervisor` watches a real effect bus fed by a real file
store; the scopes live in a real :class:`goatherd.ScopeManager` over real git
(the root works in place on a repository, the sub-agents in detached
worktrees they own). The agent's activity is plain appends on its path, as a
tool runner would make them; the host consumes ``interventions()`` exactly
as the seed's loop does (inject on ``inject``, halt on ``halt``).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from returns.result import Result, Success

import goatherd as g
import goatherd.application as ga
import goatherd.domain as gd
from goatherd.application.supervisor import INTERVENTION_SCHEMA_REF
from tests.infrastructure.sandbox.gitfixtures import make_repo

pytestmark = pytest.mark.integration

ROOT = "agent:main"
WORKER = "agent:worker"
GUIDANCE = "try a different approach"
WAIT = 10.0


# ---------------------------------------------------------------- world


@pytest.fixture
def bus() -> Iterator[g.EffectBus]:
    with g.EffectBus() as effect_bus:
        yield effect_bus


@pytest.fixture
def store(tmp_path: Path, bus: g.EffectBus) -> Iterator[g.SQLiteTraceStore]:
    with g.SQLiteTraceStore(tmp_path / "trace.db") as trace:
        yield trace.with_bus(bus)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def manager(store: g.SQLiteTraceStore, repo: Path) -> g.ScopeManager:
    mgr = g.scope_manager_for(store)
    root = g.new_local_git_sandbox(repo)
    root.create(g.SandboxSpec())
    mgr.create(ROOT, root).unwrap()
    return mgr


def fork_worktree(
    mgr: g.ScopeManager, repo: Path, owner: str, path: Path
) -> tuple[g.Scope, Path]:
    """Fork ``owner`` as an isolated child owning a fresh detached worktree."""
    sandbox = g.new_worktree_sandbox(repo, path)
    sandbox.create(g.SandboxSpec())
    child = mgr.fork_isolated(f"scope:{ROOT}", owner, None, sandbox).unwrap()
    return child, path


def worktrees(repo: Path) -> list[str]:
    listing = subprocess.run(
        ["git", "worktree", "list", "--porcelain"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [
        line.split(" ", 1)[1] for line in listing.splitlines() if "worktree " in line
    ]


# ---------------------------------------------------------------- the agent


_calls = iter(range(1_000_000))


def act(
    store: g.SQLiteTraceStore,
    kind_label: str,
    payload: Mapping[str, object],
    *,
    mode: str = "declaration",
    schema_ref: str = "yaah.tool.v1",
    owner: str = WORKER,
) -> str:
    """Append one tool call (declaration) or tool result (capture) on a path."""
    draft = g.RecordDraft(mode, schema_ref, dict(payload), kind_label)
    batch = g.AppendBatch(
        f"{owner}:call:{next(_calls)}", (g.AppendGroup(owner, None, (), (draft,)),)
    )
    return store.append(g.TRUSTED_APPEND_CONTEXT, batch).fact_ids[0]


def bash(store: g.SQLiteTraceStore, cmd: str) -> str:
    return act(store, "bash", {"cmd": cmd}, schema_ref=gd.BASH_SCHEMA_REF)


def path_records(store: g.SQLiteTraceStore, owner: str, schema: str) -> list[g.Record]:
    return [
        entry.record
        for entry in store.read_path(owner)
        if entry.record.envelope.schema_ref == schema
    ]


def interventions_on(store: g.SQLiteTraceStore, owner: str) -> list[g.Record]:
    return path_records(store, owner, INTERVENTION_SCHEMA_REF)


# ---------------------------------------------------------------- the host


@dataclass
class Host:
    """The seed's consumer loop, running in its own thread."""

    supervisor: g.Supervisor
    handled: list[gd.Intervention] = field(default_factory=list)
    results: list[Result[None, ga.SupervisorFailure]] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def run(self) -> None:
        for iv in self.supervisor.interventions():
            match iv.type:
                case gd.InterventionType.INJECT:
                    result = self.supervisor.inject(iv.scope_id, GUIDANCE)
                case gd.InterventionType.HALT:
                    result = self.supervisor.halt(iv.scope_id)
                case _:
                    result = Success(None)  # deny is for the gate; nothing to do
            with self._cond:
                self.handled.append(iv)
                self.results.append(result)
                self._cond.notify_all()

    def wait_for(self, count: int) -> gd.Intervention:
        """Block until ``count`` interventions were handled; return the last."""
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.handled) >= count, WAIT), (
                f"only {len(self.handled)} of {count} interventions arrived"
            )
            return self.handled[count - 1]


def credential_guard() -> gd.SupervisionRule:
    """A host rule that halts a scope reading credentials (the seed's halt case)."""

    def match(event: gd.SupervisedEvent) -> bool:
        path = event.payload.get("path")
        return event.mode == "declaration" and isinstance(path, str) and ".ssh/" in path

    def action(event: gd.SupervisedEvent) -> gd.Intervention:
        return gd.Intervention(
            gd.InterventionType.HALT,
            gd.scope_id_for_owner(event.trace_owner_id),
            "credential access",
        )

    return gd.SupervisionRule("credential_guard", match, action)


@pytest.fixture
def supervisor(
    manager: g.ScopeManager, bus: g.EffectBus, store: g.SQLiteTraceStore
) -> Iterator[g.Supervisor]:
    sup = g.Supervisor(manager, bus, recorder=store)
    sup.add_rule(gd.DestructiveToolRule())  # advisory warning on destructive calls
    sup.add_rule(gd.DestructiveToolGuard())  # deny blockable destructive calls
    sup.add_rule(gd.HighErrorRateRule(0.5, 10))  # alert at 50% errors
    sup.add_rule(gd.StuckDetectionRule(3))  # detect loops
    yield sup
    sup.close()


# ---------------------------------------------------------------- supervise


class TestSuperviseSubAgents:
    def test_the_seed_loop_injects_and_halts_on_what_the_rules_see(
        self,
        supervisor: g.Supervisor,
        manager: g.ScopeManager,
        store: g.SQLiteTraceStore,
        repo: Path,
        tmp_path: Path,
    ) -> None:
        worker, worktree = fork_worktree(manager, repo, WORKER, tmp_path / "wt")
        supervisor.add_rule(credential_guard())
        supervisor.start("orchestrator")
        host = Host(supervisor)
        consumer = threading.Thread(target=host.run)
        consumer.start()

        # 1. A destructive shell call: the advisory rule speaks first.
        rm = bash(store, "rm -rf build")
        first = host.wait_for(1)
        # 2. Five failing tool results: 100% errors over half the window.
        failures = [
            act(store, "tool_result", {"success": False}, mode="capture")
            for _ in range(5)
        ]
        second = host.wait_for(2)
        # 3. The same call three times running: stuck.
        reads = [act(store, "read", {"path": "src/app.py"}) for _ in range(3)]
        third = host.wait_for(3)
        # 4. A harmless shell call: the guard denies it (the watcher lets it be).
        ls = bash(store, "ls")
        fourth = host.wait_for(4)
        # 5. Reading credentials: the host rule halts the scope.
        ssh = act(store, "read", {"path": "~/.ssh/id_rsa"})
        fifth = host.wait_for(5)

        assert [(iv.type, iv.scope_id) for iv in host.handled] == [
            (gd.InterventionType.INJECT, worker.id),
            (gd.InterventionType.INJECT, worker.id),
            (gd.InterventionType.INJECT, worker.id),
            (gd.InterventionType.DENY, worker.id),
            (gd.InterventionType.HALT, worker.id),
        ]
        assert first.payload == (
            "WARNING: destructive operation detected (bash). Proceed with caution."
        )
        assert second.payload == (
            "WARNING: error rate 100% (5/5 recent calls). "
            "Consider a different approach."
        )
        assert third.payload == (
            "WARNING: same tool call repeated 3 times. "
            "You may be stuck. Try a different approach."
        )
        assert fourth.payload == (
            "Blocked destructive operation (bash). Supervisor denied."
        )
        assert fifth.payload == "credential access"
        assert host.results == [Success(None)] * 5

        # The host's actions are recorded on the worker's path, and the halt
        # discarded the scope and destroyed the worktree it owned.
        injected = path_records(store, WORKER, "goatherd.supervisor.inject.v1")
        assert [r.payload for r in injected] == [{"guidance": GUIDANCE}] * 3
        assert len(path_records(store, WORKER, "goatherd.supervisor.halt.v1")) == 1
        assert worker.state is g.ScopeState.DISCARDED
        assert not worktree.exists()
        assert str(worktree) not in worktrees(repo)

        supervisor.close()
        consumer.join(WAIT)
        assert not consumer.is_alive()
        # Every intervention is in the trace, caused by the record that
        # triggered it, in the order the supervisor saw them.
        recorded = interventions_on(store, WORKER)
        assert [
            (r.payload["rule"], r.payload["type"], r.payload["source"])
            for r in recorded
        ] == [
            ("destructive_file_guard", "inject", "watch"),
            ("error_rate_guard", "inject", "watch"),
            ("stuck_detection", "inject", "watch"),
            ("destructive_file_block", "deny", "watch"),
            ("credential_guard", "halt", "watch"),
        ]
        triggers = [rm, failures[-1], reads[-1], ls, ssh]
        assert [r.envelope.caused_by_record_ids for r in recorded] == [
            (t,) for t in triggers
        ]
        assert supervisor.record_errors == []

    def test_the_guard_denies_a_call_at_check_time_before_it_runs(
        self, supervisor: g.Supervisor, manager: g.ScopeManager, store, repo, tmp_path
    ) -> None:
        fork_worktree(manager, repo, WORKER, tmp_path / "wt")
        push = ga.ReviewEvent(
            trace_owner_id=WORKER,
            payload={"cmd": "git push --force"},
            schema_ref=gd.BASH_SCHEMA_REF,
            kind_label="bash",
        )
        verdict = supervisor.check_call(push)
        assert verdict is not None
        assert verdict.type is gd.InterventionType.DENY
        assert verdict.scope_id == f"scope:{WORKER}"
        assert verdict.payload == (
            "Blocked destructive operation (bash). Supervisor denied."
        )
        # The first verdict wins: in the seed's order the advisory rule
        # answers a call it recognises as destructive before the guard.
        rm = ga.ReviewEvent(WORKER, {"cmd": "rm -rf /"}, kind_label="bash")
        advisory = supervisor.check_call(rm)
        assert advisory is not None
        assert advisory.type is gd.InterventionType.INJECT
        denied, warned = interventions_on(store, WORKER)
        assert denied.payload["source"] == warned.payload["source"] == "gate"
        assert denied.payload["rule"] == "destructive_file_block"
        assert warned.payload["rule"] == "destructive_file_guard"
        assert denied.payload["trigger_record_id"] is None
        # A harmless structured read passes the gate and records nothing.
        before = store.fact_count()
        read = ga.ReviewEvent(WORKER, {"path": "a"}, kind_label="read")
        assert supervisor.check_call(read) is None
        assert store.fact_count() == before

    def test_inject_and_halt_on_an_unknown_scope_fail_and_change_nothing(
        self, supervisor: g.Supervisor, store: g.SQLiteTraceStore
    ) -> None:
        before = (store.fact_count(), store.max_position())
        for result in (
            supervisor.inject("scope:agent:nobody", GUIDANCE),
            supervisor.halt("scope:agent:nobody"),
        ):
            assert isinstance(result.failure(), gd.ScopeNotFoundError)
        assert (store.fact_count(), store.max_position()) == before


# ---------------------------------------------------------------- review


def deny_key_material() -> gd.SupervisionRule:
    """A merge rule: a proposal touching ``*.pem`` may not merge."""

    def match(event: gd.SupervisedEvent) -> bool:
        return event.kind_label == ga.MERGE_PROPOSED_KIND_LABEL

    def action(
        event: gd.SupervisedEvent,
    ) -> gd.Intervention | None:
        paths = event.payload.get("paths")
        assert isinstance(paths, list)
        keys = [str(p) for p in paths if str(p).endswith(".pem")]
        if not keys:
            return None
        return gd.Intervention(
            gd.InterventionType.DENY,
            "",
            f"key material: {', '.join(keys)}",
        )

    return gd.SupervisionRule("no_key_material", match, action)


def review(
    mgr: g.ScopeManager,
    gate: Callable[[gd.MergeProposal], str | None],
    child: g.Scope,
) -> tuple[gd.MergeProposal, str, str | None]:
    """The seed's review step: propose, record the proposal, ask the gate."""
    proposal = mgr.propose_merge(child.id, 1000).unwrap()
    proposed_id = mgr.record_merge_proposal(proposal).unwrap()
    return proposal, proposed_id, gate(proposal)


def supervisor_gate(
    sup: g.Supervisor, scope_id: str
) -> Callable[[gd.MergeProposal], str | None]:
    def gate(proposal: gd.MergeProposal) -> str | None:
        verdict = sup.review_merge(scope_id, proposal)
        return None if verdict is None else str(verdict.payload)

    return gate


def decision_of(store: g.SQLiteTraceStore, record_id: str) -> Mapping[str, object]:
    record = store.read_fact(g.TRUSTED_READ_CONTEXT, record_id)
    assert isinstance(record, g.Record)
    return record.payload


class TestReviewBeforeMerge:
    def test_review_merge_gates_isolated_outputs_before_settlement(
        self,
        supervisor: g.Supervisor,
        manager: g.ScopeManager,
        store: g.SQLiteTraceStore,
        repo: Path,
        tmp_path: Path,
    ) -> None:
        supervisor.add_rule(deny_key_material())
        bad, bad_wt = fork_worktree(manager, repo, "agent:try-0", tmp_path / "t0")
        good, good_wt = fork_worktree(manager, repo, "agent:try-1", tmp_path / "t1")
        (bad_wt / "keys").mkdir()
        (bad_wt / "keys" / "ca.pem").write_bytes(b"secret")
        (good_wt / "src" / "new.py").write_bytes(b"print('new')\n")

        proposal, proposed, reason = review(
            manager, supervisor_gate(supervisor, bad.id), bad
        )
        assert reason == "key material: keys/ca.pem"
        decided = manager.record_merge_decision(
            proposal, False, reason, "discarded", proposed
        ).unwrap()
        assert manager.discard(bad.id) == Success(None)

        proposal, proposed, reason = review(
            manager, supervisor_gate(supervisor, good.id), good
        )
        assert reason is None
        output = manager.seal(good.id).unwrap()
        assert output.changes == [{"path": "src/new.py", "kind": "create"}]
        assert manager.settle(output.id, "selected") == Success(None)
        approved = manager.record_merge_decision(
            proposal, True, "", "selected", proposed
        ).unwrap()

        assert (repo / "src" / "new.py").read_bytes() == b"print('new')\n"
        assert not (repo / "keys").exists()
        assert not bad_wt.exists()
        assert decision_of(store, decided)["approved"] is False
        assert decision_of(store, decided)["reason"] == "key material: keys/ca.pem"
        assert decision_of(store, approved)["action"] == "selected"
        # The supervisor's verdict sits on the denied child's path; the
        # approval (no verdict) recorded nothing.
        (verdict,) = interventions_on(store, "agent:try-0")
        assert verdict.payload["type"] == "deny"
        assert verdict.payload["source"] == "gate"
        assert verdict.payload["trigger_schema_ref"] == ga.MERGE_PROPOSED_SCHEMA_REF
        assert interventions_on(store, "agent:try-1") == []

    def test_a_denied_shared_child_is_rolled_back_and_retried_with_guidance(
        self,
        supervisor: g.Supervisor,
        manager: g.ScopeManager,
        store: g.SQLiteTraceStore,
        repo: Path,
    ) -> None:
        # The seed's code block: a shared-sandbox child on the repository.
        reviewer = g.DestructivePathReviewer(("*.pem",))
        parent = manager.get(f"scope:{ROOT}")
        assert parent is not None
        cp = manager.create_checkpoint(parent.id, b"conversation").unwrap()
        child = manager.fork(parent.id, "agent:sub").unwrap()
        (repo / "ca.pem").write_bytes(b"secret")

        proposal, proposed, deny = review(manager, reviewer, child)

        assert deny == 'change to "ca.pem" matches destructive-path pattern "*.pem"'
        manager.record_merge_decision(
            proposal, False, deny, "discarded", proposed
        ).unwrap()
        assert manager.discard(child.id) == Success(None)
        assert manager.restore_checkpoint(cp.id) == Success(b"conversation")
        assert not (repo / "ca.pem").exists()

        retry = manager.fork(parent.id, "agent:sub-2").unwrap()
        assert supervisor.inject(retry.id, deny) == Success(None)
        (repo / "notes.md").write_bytes(b"safe\n")
        proposal, proposed, verdict = review(manager, reviewer, retry)
        assert verdict is None
        manager.record_merge_decision(proposal, True, "", "merged", proposed).unwrap()
        assert parent.merge(retry) == Success(None)
        assert retry.state is g.ScopeState.MERGED
        assert (repo / "notes.md").read_bytes() == b"safe\n"
        guidance = path_records(store, "agent:sub-2", "goatherd.supervisor.inject.v1")
        assert [r.payload["guidance"] for r in guidance] == [deny]


# ---------------------------------------------------------------- replays


class TestSyntheticEventsRecordOnce:
    """Issue 7 follow-up: a review (no record id) is idempotent on replay.

    The gate here has only the merge rule: the stuck detector would see three
    identical reviews as a loop (every rule sees gate events too).
    """

    @pytest.fixture
    def gate(self, manager: g.ScopeManager, store: g.SQLiteTraceStore) -> g.Supervisor:
        sup = g.Supervisor(manager, None, recorder=store)
        sup.add_rule(deny_key_material())
        return sup

    def proposal(self, manager: g.ScopeManager, repo, tmp_path) -> gd.MergeProposal:
        child, wt = fork_worktree(manager, repo, "agent:try", tmp_path / "wt")
        (wt / "ca.pem").write_bytes(b"k")
        proposal = manager.propose_merge(child.id, 1000).unwrap()
        manager.record_merge_proposal(proposal).unwrap()
        return proposal

    def test_a_replayed_review_records_its_verdict_once(
        self, gate, manager, store, repo, tmp_path
    ) -> None:
        proposal = self.proposal(manager, repo, tmp_path)
        first = gate.review_merge("scope:agent:try", proposal)
        size = store.fact_count()
        again = gate.review_merge("scope:agent:try", proposal)
        assert store.fact_count() == size
        assert first is not None
        assert again is not None
        assert (again.type, again.payload) == (first.type, first.payload)
        # Another supervisor (say, after a restart) derives the same key.
        other = g.Supervisor(manager, None, recorder=store)
        other.add_rule(deny_key_material())
        assert other.review_merge("scope:agent:try", proposal) is not None
        assert store.fact_count() == size
        assert len(interventions_on(store, "agent:try")) == 1
        assert gate.record_errors == other.record_errors == []

    def test_the_same_review_after_new_work_on_the_path_records_again(
        self, gate, manager, store, repo, tmp_path
    ) -> None:
        proposal = self.proposal(manager, repo, tmp_path)
        gate.review_merge("scope:agent:try", proposal)
        manager.record_merge_proposal(proposal).unwrap()  # the child proposes again
        gate.review_merge("scope:agent:try", proposal)
        gate.review_merge("scope:agent:try", proposal)
        assert len(interventions_on(store, "agent:try")) == 2

    def test_a_caller_seq_tells_deliberate_repeats_apart(
        self, gate, manager, store, repo, tmp_path
    ) -> None:
        proposal = self.proposal(manager, repo, tmp_path)
        for seq in (1, 2, 1, 2):
            gate.review_merge("scope:agent:try", proposal, seq=seq)
        assert len(interventions_on(store, "agent:try")) == 2
        assert gate.record_errors == []

    def test_a_reused_seq_with_another_verdict_is_refused_and_changes_nothing(
        self, gate, manager, store, repo, tmp_path
    ) -> None:
        proposal = self.proposal(manager, repo, tmp_path)
        gate.review_merge("scope:agent:try", proposal, seq=7)
        before = (store.fact_count(), store.max_position())
        bigger = gd.MergeProposal(
            proposal.child_scope_id,
            proposal.baseline_digest,
            (*proposal.changes, gd.ProposedChange("b.pem", "create")),
        )
        verdict = gate.review_merge("scope:agent:try", bigger, seq=7)
        assert verdict is not None  # the verdict still reaches the caller
        assert (store.fact_count(), store.max_position()) == before
        (error,) = gate.record_errors
        assert isinstance(error, gd.AppendIntentConflictError)

    def test_a_replayed_gate_call_records_once(
        self, supervisor, manager, store, repo, tmp_path
    ) -> None:
        fork_worktree(manager, repo, WORKER, tmp_path / "wt")
        call = ga.ReviewEvent(
            WORKER,
            {"cmd": "ls"},
            schema_ref=gd.BASH_SCHEMA_REF,
            kind_label="bash",
        )
        supervisor.check_call(call)
        supervisor.check_call(call)
        assert len(interventions_on(store, WORKER)) == 1
        bash(store, "ls")  # the call ran and was recorded: a new occurrence
        supervisor.check_call(call)
        assert len(interventions_on(store, WORKER)) == 2  # (not started: no watcher)
