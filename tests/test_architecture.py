"""The house rules as tests: the import-linter contracts of pyproject.toml, no import cycle
(function-level imports included), at most 10 flat modules at the package root, no module
over 600 lines, every package's map naming all its modules, every system of one shape."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from import_cycles import import_cycles  # noqa: E402


def test_the_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.fail("lint-imports is not installed: `make setup` installs the dev extra")
    out = subprocess.run(
        [str(lint), "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_no_import_cycle_in_rzero():
    assert import_cycles("rzero") == []


def test_a_cycle_through_a_function_level_import_is_found(tmp_path, monkeypatch):
    pkg = tmp_path / "ringpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from ringpkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from ringpkg import c\n    return c\n")
    (pkg / "c.py").write_text("import ringpkg.a\n")
    (pkg / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ringpkg import e\n"
    )
    (pkg / "e.py").write_text("from ringpkg import d\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert importlib.util.find_spec("ringpkg") is not None
    # a -> b -> c -> a is a ring; d -> e only under TYPE_CHECKING is not
    assert import_cycles("ringpkg") == [["ringpkg.a", "ringpkg.b", "ringpkg.c"]]


def test_the_package_root_holds_at_most_ten_flat_modules():
    flat = sorted(p.name for p in (ROOT / "rzero").glob("*.py"))
    assert len(flat) <= 10, flat


def test_no_module_is_over_600_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in (ROOT / "rzero").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 600
    }
    assert long == {}


def test_every_package_names_all_its_modules():
    """A package's `__init__` docstring is its map: it names every module in it."""
    import ast

    unnamed = {}
    for init in sorted((ROOT / "rzero").rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        modules = sorted(
            p.name for p in init.parent.glob("*.py") if p.stem not in ("__init__", "__main__")
        )
        if missing := [m for m in modules if m not in doc]:
            unnamed[str(init.parent.relative_to(ROOT))] = missing
    assert unnamed == {}


def test_every_system_has_the_same_shape():
    """Each system's package holds its run, its report, its plan and its run folder's
    layout, and declares what the CLI sees of it; `run.task` becomes a system in one map."""
    from rzero.cli.systems import SYSTEMS

    for package in ("math", "code", "spin", "spag", "solver_task"):
        present = {p.name for p in (ROOT / "rzero" / package).glob("*.py")}
        assert {"report.py", "plan.py", "layout.py"} <= present, package
        assert "run.py" in present, package
    assert {system.name for system in SYSTEMS.values()} == set(SYSTEMS)


def test_the_sampling_seam_has_one_import_path():
    """Generator, SamplingParams and the rest of the seam come from
    `rzero.generation.interface` only, never through a backend."""
    import re

    seam = re.compile(
        r"from rzero\.generation\.backends import [^\n]*\b(Generator|SamplingParams|"
        r"GenerationStats|GenerationError|cut_at_stop)\b"
    )
    found = [
        str(p.relative_to(ROOT))
        for folder in ("rzero", "tests", "bench", "scripts")
        for p in (ROOT / folder).rglob("*.py")
        if seam.search(p.read_text())
    ]
    assert found == []
