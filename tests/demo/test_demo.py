"""``goatherd demo`` run in process: the session, its summary, its trace."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from goatherd.cli import main
from goatherd.demo import (
    DemoError,
    DemoOptions,
    render_summary,
    run_demo,
    summary_json,
)
from goatherd.demo.state import COMPLETED_SCHEMA
from goatherd.domain import (
    CheckpointCreated,
    CheckpointRestored,
    SupervisorDecided,
)
from tests.demo.support import (
    assert_final_state,
    count_schema,
    log_of,
    settlements,
)

INTERVENTION = "goatherd.supervisor.intervention.v1"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    directory = tmp_path_factory.mktemp("demo") / "run"
    notes: list[str] = []
    run = run_demo(DemoOptions(directory), notes.append)
    return directory, run, notes


def tree(directory: Path) -> dict[str, bytes]:
    found = {}
    for dirpath, _, filenames in os.walk(directory):
        for name in filenames:
            path = Path(dirpath) / name
            found[str(path.relative_to(directory))] = path.read_bytes()
    return found


class TestAFreshRun:
    def test_the_summary_shows_the_denied_failed_and_winning_attempts(self, finished):
        _, run, _ = finished
        text = render_summary(run)
        assert "attempt-0 (reckless): DENIED" in text
        assert "the gate blocked `rm -rf tests" in text
        assert "merge denied: this scope attempted a blocked command" in text
        assert "attempt-1 (hasty): DISCARDED" in text
        assert "not chosen: tests fail (FAILED (failures=1))" in text
        assert "attempt-2 (careful): SELECTED" in text
        assert "chosen: tests pass (OK)" in text
        assert "restored 1 checkpoint(s) on the way" in text

    def test_the_summary_shows_the_tree_counts_and_how_to_open_the_trace(
        self, finished
    ):
        directory, run, _ = finished
        text = render_summary(run)
        assert "scope:demo:main  active" in text
        assert "scope:demo:main:attempt-2  merged" in text
        assert f"{run.stats.records} records in total" in text
        assert "goatherd.run.completed.v1" in text
        assert f"trace: {directory / 'trace.sqlite'}" in text
        assert f"goatherd traceui --db {directory / 'trace.sqlite'}" in text

    def test_the_project_ends_with_exactly_the_winners_change(self, finished):
        directory, run, _ = finished
        assert_final_state(directory)
        assert run.project_changes == ("stats.py",)

    def test_every_attempt_ends_and_exactly_the_winner_settles_selected(self, finished):
        directory, run, _ = finished
        outcomes = [a.status for a in run.state.attempts]
        assert outcomes == ["denied", "sealed", "selected"]
        assert settlements(directory / "trace.sqlite") == ["discarded", "selected"]
        assert run.state.winner is not None
        assert run.state.winner.agent == "careful"

    def test_every_proposal_gets_a_decision_through_the_merge_gate(self, finished):
        directory, _, _ = finished
        decisions = [
            (payload["child_scope"], payload["approved"], payload["action"])
            for _, owner, schema, payload in log_of(directory / "trace.sqlite")
            if schema == SupervisorDecided.SCHEMA and owner == "demo:main"
        ]
        assert decisions == [
            ("scope:demo:main:attempt-0", False, "discarded"),
            ("scope:demo:main:attempt-2", True, "selected"),
            ("scope:demo:main:attempt-1", True, "discarded"),
        ]

    def test_the_supervisor_records_the_blocked_call_and_the_denied_merge(
        self, finished
    ):
        directory, _, _ = finished
        interventions = [
            (payload["type"], payload["rule"], payload["trigger_schema_ref"])
            for _, owner, schema, payload in log_of(directory / "trace.sqlite")
            if schema == INTERVENTION
        ]
        assert interventions == [
            ("deny", "destructive_file_block", "yaah.tool.bash.v1"),
            ("deny", "blocked_scope_may_not_merge", "goatherd.merge.proposed.v1"),
        ]

    def test_the_careful_agent_gets_its_conversation_back_from_the_checkpoint(
        self, finished
    ):
        directory, _, _ = finished
        trace = directory / "trace.sqlite"
        assert count_schema(trace, CheckpointCreated.SCHEMA) == 1
        assert count_schema(trace, CheckpointRestored.SCHEMA) == 1
        restored = [
            payload
            for _, _, schema, payload in log_of(trace)
            if schema == "demo.agent.restored.v1"
        ]
        assert len(restored) == 1
        # The snapshot held the task and the agent's first thought; the six
        # messages of the failed experiment are gone after the restore.
        assert restored[0]["messages_restored"] == 2
        assert restored[0]["messages_dropped"] == 6

    def test_the_session_records_its_completion_once(self, finished):
        directory, _, notes = finished
        assert count_schema(directory / "trace.sqlite", COMPLETED_SCHEMA) == 1
        assert notes[-1] == "the winner is careful (scope:demo:main:attempt-2)"

    def test_the_json_summary_carries_the_same_facts(self, finished):
        directory, run, _ = finished
        data = summary_json(run)
        assert data["winner"] == "scope:demo:main:attempt-2"
        attempts = data["attempts"]
        assert isinstance(attempts, list)
        assert [a["outcome"] for a in attempts] == [
            "denied",
            "discarded",
            "selected",
        ]
        assert data["trace"] == str(directory / "trace.sqlite")
        json.dumps(data)  # serializable as is


class TestARerun:
    def test_a_completed_session_reports_already_complete_and_writes_nothing(
        self, finished
    ):
        directory, run, _ = finished
        before = log_of(directory / "trace.sqlite")
        again = run_demo(DemoOptions(directory))
        assert again.already_complete
        assert log_of(directory / "trace.sqlite") == before
        assert "already complete" in render_summary(again)
        assert again.state.winner == run.state.winner

    def test_fresh_wipes_the_previous_session_and_runs_it_again(self, tmp_path):
        directory = tmp_path / "demo"
        first = run_demo(DemoOptions(directory))
        second = run_demo(DemoOptions(directory, fresh=True))
        assert not second.already_complete
        assert not second.resumed
        assert second.stats.records == first.stats.records
        assert_final_state(directory)


class TestTheCommand:
    def test_the_cli_prints_the_summary_and_exits_zero(self, tmp_path, capsys):
        code = main(["demo", "--dir", str(tmp_path / "d")])
        out = capsys.readouterr().out
        assert code == 0
        assert "DENIED" in out
        assert "DISCARDED" in out
        assert "SELECTED" in out
        assert "goatherd traceui --db" in out

    def test_json_prints_one_document_and_progress_goes_to_stderr(
        self, tmp_path, capsys
    ):
        code = main(["demo", "--dir", str(tmp_path / "d"), "--json"])
        captured = capsys.readouterr()
        assert code == 0
        data = json.loads(captured.out)
        assert data["winner"] == "scope:demo:main:attempt-2"
        assert "demo: round 1" in captured.err

    @pytest.mark.parametrize("value", ["0", "-3", "many"])
    def test_crash_after_must_be_a_positive_number(self, tmp_path, value, capsys):
        with pytest.raises(SystemExit) as exit_info:
            main(["demo", "--dir", str(tmp_path / "d"), "--crash-after", value])
        assert exit_info.value.code == 2
        assert "--crash-after" in capsys.readouterr().err
        assert not (tmp_path / "d").exists()


class TestBadDirectories:
    def test_a_foreign_non_empty_directory_is_refused_and_left_untouched(
        self, tmp_path, capsys
    ):
        foreign = tmp_path / "mine"
        foreign.mkdir()
        (foreign / "notes.txt").write_text("keep me")
        before = tree(foreign)
        code = main(["demo", "--dir", str(foreign), "--fresh"])
        assert code == 1
        assert "is not a goatherd demo directory" in capsys.readouterr().err
        assert tree(foreign) == before

    def test_a_file_is_refused(self, tmp_path):
        target = tmp_path / "file"
        target.write_text("x")
        with pytest.raises(DemoError, match="is a file"):
            run_demo(DemoOptions(target))
        assert target.read_text() == "x"

    def test_a_trace_whose_project_is_missing_is_refused_and_kept(self, tmp_path):
        directory = tmp_path / "demo"
        run_demo(DemoOptions(directory))
        trace = directory / "trace.sqlite"
        before = log_of(trace)
        git_dir = directory / "project"
        git_dir.rename(tmp_path / "moved")
        with pytest.raises(DemoError, match="which is missing; start over with"):
            run_demo(DemoOptions(directory))
        assert log_of(trace) == before
        assert not git_dir.exists()
