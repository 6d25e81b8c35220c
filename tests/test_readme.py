"""The README stays a front door: at most 150 lines, and everything it shows is real — every
path in it exists, every link it makes lands on a file, every `make` target it names is one
of the Makefile's, and every `rzero` command it names is one of the CLI's."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from rzero.cli.parser import build_parser

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
MAX_LINES = 150
TOP = ("configs", "docs", "rzero", "tests", "bench", "scripts", "results", "requirements")


def _text() -> str:
    return README.read_text()


def _code(text: str) -> list[str]:
    """Every code span and fenced block: where paths and commands are shown."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))
    return blocks + spans


def _subcommands() -> set[str]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


def _make_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), flags=re.M))


def test_the_readme_is_at_most_150_lines():
    lines = _text().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


def test_every_link_lands_on_a_file():
    targets = re.findall(r"\]\(([^)\s]+)\)", _text())
    local = [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t)]
    assert local, "the README links no doc"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, f"README.md links files that do not exist: {missing}"


def test_every_doc_is_in_the_index():
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", _text()))
    docs = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert not docs - linked, f"docs the README does not link: {sorted(docs - linked)}"


def test_every_path_shown_exists():
    pattern = re.compile(rf"(?<![\w/.-])((?:{'|'.join(TOP)})/[\w./-]*[\w/])")
    paths = {m for chunk in _code(_text()) for m in pattern.findall(chunk)}
    assert any(p.startswith("configs/") for p in paths)
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"README.md shows paths that do not exist: {missing}"


def test_every_make_target_named_is_in_the_makefile():
    named = {m for chunk in _code(_text()) for m in re.findall(r"\bmake ([a-z][\w-]*)", chunk)}
    assert {"iterate", "test"} <= named
    unknown = named - _make_targets()
    assert not unknown, f"README.md names make targets the Makefile lacks: {sorted(unknown)}"


def test_every_rzero_command_named_is_in_the_cli():
    named = {
        m
        for chunk in _code(_text())
        for m in re.findall(r"(?:^|[\s/`])rzero ([a-z][\w-]*)", chunk, flags=re.M)
    }
    assert named, "the README names no rzero command"
    unknown = named - _subcommands()
    assert not unknown, f"README.md names rzero commands the CLI lacks: {sorted(unknown)}"
