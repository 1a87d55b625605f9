"""``python -m bench`` ends with one PASS/MISS line per target of every scenario."""

from __future__ import annotations

import io
import sys
import types

import pytest

from bench import __main__ as bench_main
from bench.report import Verdicts, VerdictTap, verdict


def test_the_tap_collects_verdict_lines_per_scenario_and_writes_everything() -> None:
    out = io.StringIO()
    verdicts = Verdicts()
    tap = VerdictTap(out, verdicts)
    tap.scenario("store")
    tap.write("append: 1.2 ms  PASS (target <= 2)\nnot a verd")
    tap.write("ict: PASSWORD\n")
    tap.scenario("mcp")
    tap.write("MISS: overhead 25 ms < 20 ms")
    tap.scenario("text")
    tap.end_line()
    assert out.getvalue().endswith("MISS: overhead 25 ms < 20 ms")
    assert verdicts.lines == {
        "store": ["append: 1.2 ms  PASS (target <= 2)"],
        "mcp": ["MISS: overhead 25 ms < 20 ms"],
        "text": [],
    }
    table = verdicts.table()
    assert "store  PASS   append: 1.2 ms  PASS (target <= 2)" in table
    assert "mcp    MISS   MISS: overhead 25 ms < 20 ms" in table
    assert "text   -      (no verdict)" in table
    assert table[-1] == "1 PASS, 1 MISS, 0 scenario(s) failed"


def test_a_run_prints_the_summary_and_goes_on_after_a_failing_scenario(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def good() -> None:
        print("figure 3 ms")
        verdict(True, "figure 3 ms < 5 ms")

    def bad() -> None:
        print("MISS: half done")
        raise RuntimeError("the server went away")

    for name, run in (("good", good), ("bad", bad)):
        module = types.ModuleType(f"bench.bench_{name}")
        module.run = run  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, f"bench.bench_{name}", module)
    monkeypatch.setattr(bench_main, "_scenarios", lambda: ["bad", "good"])
    assert bench_main.main(["bad", "good"]) == 1
    out = capsys.readouterr().out
    summary = out.split("== summary: one line per target", 1)[1]
    assert "bad   ERROR  RuntimeError: the server went away" in summary
    assert "bad   MISS   MISS: half done" in summary
    assert "good  PASS   PASS: figure 3 ms < 5 ms" in summary
    assert "1 PASS, 1 MISS, 1 scenario(s) failed" in summary
    assert not isinstance(sys.stdout, VerdictTap)
