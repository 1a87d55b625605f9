"""The example in docs/projections.md runs as written."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "projections.md"


def test_the_projections_doc_example_runs_and_its_asserts_hold(tmp_path) -> None:
    text = DOC.read_text(encoding="utf-8")
    (example,) = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    script = tmp_path / "projections_doc_example.py"
    script.write_text(example, encoding="utf-8")
    namespace = runpy.run_path(str(script), run_name="projections_doc_example")
    assert namespace["runner"].status()[0].lag == 0


def test_the_projections_doc_fits_on_a_page() -> None:
    assert len(DOC.read_text(encoding="utf-8").splitlines()) <= 80
