"""The built-in supervision rules, with the exact semantics of runtime-spec 11.3."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goatherd.domain import (
    DestructiveToolGuard,
    DestructiveToolRule,
    HighErrorRateRule,
    Intervention,
    InterventionType,
    StuckDetectionRule,
    SupervisionRule,
    destructive_tool_guard,
    destructive_tool_rule,
    high_error_rate_rule,
    stuck_detection_rule,
)


@dataclass(frozen=True)
class Event:
    trace_owner_id: str = "agent:a"
    mode: str = "declaration"
    schema_ref: str = "yaah.tool.bash.v1"
    kind_label: str = "bash"
    payload: Mapping[str, object] = field(default_factory=dict)


def bash(cmd: object, owner: str = "agent:a", mode: str = "declaration") -> Event:
    return Event(trace_owner_id=owner, mode=mode, payload={"cmd": cmd})


def outcome(success: object, owner: str = "agent:a", label: str = "tool") -> Event:
    return Event(
        trace_owner_id=owner,
        mode="capture",
        schema_ref="yaah.tool.result.v1",
        kind_label=label,
        payload={"success": success},
    )


def fire(rule: SupervisionRule, event: Event) -> Intervention | None:
    return rule.action(event) if rule.match(event) else None


class TestDestructiveToolRule:
    @pytest.mark.parametrize(
        "cmd",
        [
            "rm -rf build",
            "rm\t-r x",
            "rmdir out",
            "mv a b",
            "chmod 777 x",
            "chown me x",
            "mkfs.ext4 /dev/sda",
            "dd if=/dev/zero of=x",
            "format c:",
            "echo hi > /etc/passwd",
            "echo hi >> /etc/hosts",
        ],
    )
    def test_a_destructive_shell_declaration_gets_an_advisory_inject(
        self, cmd: str
    ) -> None:
        rule = destructive_tool_rule()
        assert rule.name == "destructive_file_guard"
        assert fire(rule, bash(cmd)) == Intervention(
            InterventionType.INJECT,
            "scope:agent:a",
            "WARNING: destructive operation detected (bash). Proceed with caution.",
        )

    @pytest.mark.parametrize("cmd", ["ls -la", "git status", "rm${IFS}-rf /", 7, None])
    def test_a_harmless_or_evasive_shell_call_does_not_match(self, cmd: object) -> None:
        # Substring matching is advisory only: ${IFS} evades it by design.
        assert not destructive_tool_rule().match(bash(cmd))

    def test_any_structured_write_or_delete_matches_by_schema_or_label(self) -> None:
        rule = destructive_tool_rule()
        for event in (
            Event(schema_ref="yaah.tool.write.v1", kind_label="w"),
            Event(schema_ref="x", kind_label="write"),
            Event(schema_ref="yaah.tool.delete.v1", kind_label="d"),
            Event(schema_ref="x", kind_label="delete"),
        ):
            iv = fire(rule, event)
            assert iv is not None
            assert iv.payload == (
                f"WARNING: destructive operation detected ({event.kind_label}). "
                "Proceed with caution."
            )

    def test_a_capture_never_matches(self) -> None:
        assert not destructive_tool_rule().match(bash("rm -rf /", mode="capture"))

    def test_the_seed_constructor_name_is_the_same_rule_builder(self) -> None:
        assert DestructiveToolRule is destructive_tool_rule


class TestDestructiveToolGuard:
    @pytest.mark.parametrize("cmd", ["ls", "rm${IFS}-rf /", "echo ok", None])
    def test_every_shell_declaration_is_denied(self, cmd: object) -> None:
        rule = destructive_tool_guard()
        assert rule.name == "destructive_file_block"
        assert fire(rule, bash(cmd, owner="w:1")) == Intervention(
            InterventionType.DENY,
            "scope:w:1",
            "Blocked destructive operation (bash). Supervisor denied.",
        )

    def test_writes_and_deletes_are_denied_and_other_tools_pass(self) -> None:
        rule = destructive_tool_guard()
        assert rule.match(Event(schema_ref="yaah.tool.write.v1", kind_label="w"))
        assert rule.match(Event(schema_ref="s", kind_label="delete"))
        assert not rule.match(Event(schema_ref="yaah.tool.read.v1", kind_label="read"))
        assert not rule.match(bash("ls", mode="capture"))

    def test_the_seed_constructor_name_is_the_same_guard_builder(self) -> None:
        assert DestructiveToolGuard is destructive_tool_guard


class TestHighErrorRateRule:
    def test_it_fires_at_the_threshold_with_the_message_computed_before_reset(
        self,
    ) -> None:
        rule = high_error_rate_rule(0.5, 4)
        assert rule.name == "error_rate_guard"
        # window 4: at least 2 results are needed.
        assert fire(rule, outcome(False)) is None
        iv = fire(rule, outcome(True))
        assert iv == Intervention(
            InterventionType.INJECT,
            "scope:agent:a",
            "WARNING: error rate 50% (1/2 recent calls). "
            "Consider a different approach.",
        )

    def test_firing_resets_the_owner_history(self) -> None:
        rule = high_error_rate_rule(0.5, 4)
        fire(rule, outcome(False))
        assert fire(rule, outcome(False)) is not None
        # After the reset one result is below the minimum of window // 2 = 2.
        assert fire(rule, outcome(False)) is None
        assert fire(rule, outcome(False)) is not None

    def test_only_the_last_window_results_count(self) -> None:
        rule = high_error_rate_rule(0.75, 4)
        for _ in range(4):
            assert fire(rule, outcome(True)) is None
        assert fire(rule, outcome(False)) is None  # 1/4
        assert fire(rule, outcome(False)) is None  # 2/4
        iv = fire(rule, outcome(False))  # 3/4: the oldest successes slid out
        assert iv is not None
        assert iv.payload == (
            "WARNING: error rate 75% (3/4 recent calls). Consider a different approach."
        )

    def test_a_non_bool_success_counts_as_a_failure(self) -> None:
        rule = high_error_rate_rule(1.0, 2)
        iv = fire(rule, outcome("yes"))
        assert iv is not None
        assert "(1/1 recent calls)" in str(iv.payload)

    def test_owners_keep_separate_windows(self) -> None:
        rule = high_error_rate_rule(0.5, 4)
        assert fire(rule, outcome(False, owner="a")) is None
        assert fire(rule, outcome(False, owner="b")) is None
        iv = fire(rule, outcome(False, owner="a"))
        assert iv is not None
        assert iv.scope_id == "scope:a"

    def test_a_non_positive_window_means_ten(self) -> None:
        rule = high_error_rate_rule(0.5, 0)
        for _ in range(4):
            assert fire(rule, outcome(False)) is None
        iv = fire(rule, outcome(False))
        assert iv is not None
        assert "(5/5 recent calls)" in str(iv.payload)

    def test_window_one_needs_no_minimum(self) -> None:
        rule = high_error_rate_rule(0.5, 1)
        assert fire(rule, outcome(True)) is None
        assert fire(rule, outcome(False)) is not None

    def test_the_rate_rounds_half_up_to_a_whole_percent(self) -> None:
        rule = high_error_rate_rule(0.1, 8)
        results = [True] * 7
        for ok in results[:3]:
            assert fire(rule, outcome(ok)) is None
        iv = fire(rule, outcome(False))  # 1/4 = 25%
        assert iv is not None
        assert "25% (1/4" in str(iv.payload)
        rule = high_error_rate_rule(0.1, 8)
        for ok in [True] * 7:
            fire(rule, outcome(ok))
        iv = fire(rule, outcome(False))  # 1/8 = 12.5% -> 13%
        assert iv is not None
        assert "13% (1/8" in str(iv.payload)

    @pytest.mark.parametrize(
        "event",
        [
            outcome(False, label="turn:started"),
            outcome(False, label="turn:completed"),
            outcome(False, label="turn:failed"),
            Event(mode="capture", payload={"ok": False}),
            Event(mode="declaration", payload={"success": False}),
        ],
    )
    def test_turn_outcomes_declarations_and_payloads_without_success_do_not_match(
        self, event: Event
    ) -> None:
        assert not high_error_rate_rule(0.5, 2).match(event)

    def test_the_seed_constructor_name_is_the_same_rule_builder(self) -> None:
        assert HighErrorRateRule is high_error_rate_rule

    @given(st.lists(st.booleans(), max_size=60), st.integers(1, 12))
    def test_a_fired_message_reports_a_consistent_non_zero_denominator(
        self, results: list[bool], window: int
    ) -> None:
        rule = high_error_rate_rule(0.5, window)
        for ok in results:
            iv = fire(rule, outcome(ok))
            if iv is not None:
                text = str(iv.payload)
                errors, total = text.split("(")[1].split(" ")[0].split("/")
                assert 0 < int(total) <= window
                assert int(errors) / int(total) >= 0.5


class TestStuckDetectionRule:
    def test_the_same_call_repeated_threshold_times_fires_then_resets(self) -> None:
        rule = stuck_detection_rule(3)
        assert rule.name == "stuck_detection"
        assert fire(rule, bash("ls")) is None
        assert fire(rule, bash("ls")) is None
        message = (
            "WARNING: same tool call repeated 3 times. "
            "You may be stuck. Try a different approach."
        )
        assert fire(rule, bash("ls")) == Intervention(
            InterventionType.INJECT, "scope:agent:a", message
        )
        # Reset to 0: three more identical calls are needed to fire again.
        assert fire(rule, bash("ls")) is None
        assert fire(rule, bash("ls")) is None
        assert fire(rule, bash("ls")) is not None

    def test_a_different_call_restarts_the_count(self) -> None:
        rule = stuck_detection_rule(2)
        assert fire(rule, bash("ls")) is None
        assert fire(rule, bash("pwd")) is None
        assert fire(rule, bash("pwd")) is not None

    def test_values_are_compared_by_canonical_json_so_1_and_1_0_differ(self) -> None:
        rule = stuck_detection_rule(2)
        assert fire(rule, bash(1)) is None
        assert fire(rule, bash(1.0)) is None
        assert fire(rule, bash("1")) is None
        assert fire(rule, bash({"b": 1, "a": [2]})) is None
        assert fire(rule, bash({"a": [2], "b": 1})) is not None

    def test_owners_are_counted_separately(self) -> None:
        rule = stuck_detection_rule(2)
        assert fire(rule, bash("ls", owner="a")) is None
        assert fire(rule, bash("ls", owner="b")) is None
        iv = fire(rule, bash("ls", owner="a"))
        assert iv is not None
        assert iv.scope_id == "scope:a"

    def test_turn_creation_and_captures_do_not_participate(self) -> None:
        rule = stuck_detection_rule(1)
        assert not rule.match(Event(kind_label="turn:created"))
        assert not rule.match(Event(kind_label="turn:started"))
        assert not rule.match(bash("ls", mode="capture"))
        assert rule.match(Event(schema_ref="note.v1", kind_label="note"))

    def test_a_value_that_is_not_json_is_still_rendered(self) -> None:
        rule = stuck_detection_rule(2)
        assert fire(rule, bash({1, 2})) is None
        assert fire(rule, bash({1, 2})) is not None

    def test_the_seed_constructor_name_is_the_same_rule_builder(self) -> None:
        assert StuckDetectionRule is stuck_detection_rule

    def test_concurrent_observers_count_every_event_exactly_once(self) -> None:
        rule = stuck_detection_rule(1000)
        fired: list[Intervention] = []

        def worker() -> None:
            for _ in range(250):
                iv = fire(rule, bash("ls"))
                if iv is not None:
                    fired.append(iv)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(fired) == 1
