"""ARCHITECTURE.md's map matches the tree: no package missing, none invented."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _mapped() -> set[str]:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    table = text.split("## The map", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([\w/]+)` \|", table, flags=re.MULTILINE))


def _packages() -> set[str]:
    return {
        str(init.parent.relative_to(ROOT))
        for init in (ROOT / "goatherd").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }


def test_every_package_has_a_line_in_the_map() -> None:
    assert sorted(_packages() - _mapped()) == []


def test_every_package_the_map_names_exists() -> None:
    assert sorted(_mapped() - _packages()) == []


def test_every_file_the_settle_walk_names_exists() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    walk = text.split("## How a `settle` travels", 1)[1]
    named = set(re.findall(r"`(goatherd/[\w/]+(?:\.py)?)`", walk))
    assert named, "the walk names no file"
    assert sorted(n for n in named if not (ROOT / n).exists()) == []


def test_no_loose_module_beside_the_composition_root() -> None:
    loose = sorted(
        p.name
        for p in (ROOT / "goatherd" / "infrastructure").glob("*.py")
        if p.name not in {"__init__.py", "bootstrap.py"}
    )
    assert loose == []


# A module past this is split along its responsibilities (ADR 0093); the
# store's modules and the composition root are the exceptions.
MODULE_LINE_LIMIT = 600


def test_no_module_outside_the_store_and_the_composition_root_passes_600_lines() -> (
    None
):
    exempt = {"goatherd/infrastructure/bootstrap.py"}
    too_long = {
        path: lines
        for module in (ROOT / "goatherd").rglob("*.py")
        if "__pycache__" not in module.parts
        and (path := str(module.relative_to(ROOT))) not in exempt
        and not path.startswith("goatherd/infrastructure/store/")
        and (lines := len(module.read_text(encoding="utf-8").splitlines()))
        > MODULE_LINE_LIMIT
    }
    assert too_long == {}, "split these along their responsibilities"
