"""Graph runs in several processes: killed with SIGKILL, and at once on one trace.

A run killed mid-run resumes from the trace to the same end: the process is
killed as soon as it reports step K, while LangGraph's next
superstep (its writes, its checkpoint) is under way; a new process reopens the
trace, which verifies, and LangGraph resumes the thread to the state an
uninterrupted run reaches. Three processes running a thread each at the same
time on one trace each reach that end too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from goatherd.integrations.langgraph import GoatherdSaver
from tests.integrations.langgraph.crash_run import CONFIG, STEPS, build, final

ROOT = Path(__file__).resolve().parents[3]
MODULE = "tests.integrations.langgraph.crash_run"


def expected() -> str:
    app = build(InMemorySaver())
    return final(app.invoke({"messages": [], "n": 0}, CONFIG))


def run_until_killed(url: str, after_steps: int) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", MODULE, url, "run"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if int(line) >= after_steps:
                break
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL


@pytest.mark.integration
@pytest.mark.parametrize("after_steps", [3, 40, 97])
def test_a_killed_run_resumes_to_the_same_end(trace_url: str, after_steps: int) -> None:
    run_until_killed(trace_url, after_steps)
    goatherd = Path(sys.executable).with_name("goatherd")
    verify = subprocess.run(
        [str(goatherd), "verify", trace_url],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    resumed = subprocess.run(
        [sys.executable, "-m", MODULE, trace_url, "resume"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads(resumed.stdout) == json.loads(expected())
    assert json.loads(resumed.stdout)["n"] == STEPS


@pytest.mark.integration
def test_processes_running_graphs_at_once_on_one_trace(trace_url: str) -> None:
    threads = ("alpha", "beta", "gamma")
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", MODULE, trace_url, "full", thread],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for thread in threads
    ]
    outputs = []
    for run in runs:
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0, err[-3000:]
        outputs.append(json.loads(out))
    assert outputs == [json.loads(expected())] * len(threads)
    with GoatherdSaver.from_url(trace_url) as saver:
        for thread in threads:
            history = list(saver.list({"configurable": {"thread_id": thread}}))
            assert len(history) == STEPS + 2
            assert history[0].checkpoint["channel_values"]["n"] == STEPS
