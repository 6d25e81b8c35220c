"""A run directory: its config and fingerprint, iteration folders and phase markers; the
files rebuilt from the markers (`metrics.jsonl`, `report.md`, ...) are the system's report's.

    RUN_DIR/config.yaml            the resolved config (its fingerprint guards resume)
    RUN_DIR/iter_KK/phases/P.json  the marker of phase P of iteration KK, written last
    RUN_DIR/metrics.jsonl          one row per committed phase and challenger GRPO step,
                                   with the warnings the phase recorded
    RUN_DIR/report.md, report.html the run's report and its curves, rebuilt after every
                                   commit (the system's `Run.rebuild`)
    RUN_DIR/best.json              the solver with the best held-out evaluation average

A phase is committed by writing its marker atomically after its outputs, so a marker
vouches for a finished phase and a missing one means "redo it". Markers record paths of
the run's own files relative to RUN_DIR (as ``run:iter_01/solver``), so a run that is moved
or copied resumes on its own files, never on those of whatever sits at the old path; base
models and other outside paths stay as given. Every marker also holds the config's
fingerprint, so a changed config is refused even when `config.yaml` was deleted.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rzero.config import ConfigError, RZeroConfig, config_from_dict, fingerprinted
from rzero.io import DamagedFileError, read_jsonl, write_json_atomic, write_text_atomic

# the JSONL row files of an iteration a RunDir with no layout reads (a report, the audit)
ROW_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Layout:
    """What one system's run folder holds, declared by the system (`rzero.rundir.run.Run`):

    phases    its phases, in run order within an iteration
    outputs   what each phase writes in iter_KK/, recorded (size, SHA-256) in its marker
    rows      the iteration's JSONL files (`RunDir.rows`)
    training  the phases every training process runs (the main one commits)
    pushed    the phases whose checkpoint `run.push_to_hub` pushes
    torn_tail the row files appended to during a phase, so a kill may leave a torn last line
    """

    name: str
    phases: tuple[str, ...]
    outputs: Mapping[str, tuple[str, ...]]
    rows: tuple[str, ...] = ()
    training: tuple[str, ...] = ()
    pushed: tuple[str, ...] = ()
    torn_tail: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        missing = [p for p in self.phases if p not in self.outputs]
        if missing:
            raise ValueError(f"layout {self.name}: no outputs declared for {missing}")


LOCK_FILE = ".lock"  # the writer's lock (`rzero.rundir.lock`), kept by --fresh
# what --fresh keeps besides: the logs, which the launcher of this very run writes into
KEPT_BY_FRESH = (LOCK_FILE, "logs")
RUN_PREFIX = "run:"  # a marker's path inside RUN_DIR, relative to it


class RunDirConflict(RuntimeError):
    """RUN_DIR holds a run made with a different config."""


class RunDir:
    """One run's folder; every phase, the audit and the comparison read it through this.
    Reading needs no `layout`; preparing, verifying and committing need the system's."""

    def __init__(self, path: str | Path, layout: Layout | None = None):
        self.path = Path(path)
        self._layout = layout

    @property
    def layout(self) -> Layout:
        if self._layout is None:
            raise TypeError(
                f"RunDir({str(self.path)!r}) was opened without its system's "
                "layout: it can read markers and rows, not commit or verify"
            )
        return self._layout

    # ------------------------------------------------------------ layout

    def iter_dir(self, k: int) -> Path:
        return self.path / f"iter_{k:02d}"

    def marker_path(self, k: int, phase: str) -> Path:
        return self.iter_dir(k) / "phases" / f"{phase}.json"

    def iterations(self) -> list[int]:
        """Every k >= 0 with an iter_KK folder, sorted."""
        found = []
        for d in self.path.glob("iter_*"):
            suffix = d.name[len("iter_") :]
            if d.is_dir() and suffix.isdigit():
                found.append(int(suffix))
        return sorted(found)

    def trained_iterations(self) -> list[int]:
        """`iterations` from 1: those of the loop (0 holds only the base model's evaluation)."""
        return [k for k in self.iterations() if k >= 1]

    def relative(self, path: str | Path) -> str:
        """`path` as a marker stores it: ``run:REL`` inside RUN_DIR, else as given."""
        p = Path(path)
        try:
            return RUN_PREFIX + p.resolve().relative_to(self.path.resolve()).as_posix()
        except ValueError:
            return str(path)

    def resolve(self, stored: str) -> str:
        """A path read from a marker, resolved against this RUN_DIR."""
        if stored.startswith(RUN_PREFIX):
            return str(self.path / stored[len(RUN_PREFIX) :])
        return stored

    # ------------------------------------------------------------ reading

    def marker(self, k: int, phase: str) -> dict[str, Any] | None:
        """The committed marker of a phase, or None. A marker that does not parse is an
        error naming its file: it was written atomically, so it was damaged afterwards."""
        path = self.marker_path(k, phase)
        if not path.is_file():
            return None
        try:
            marker = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DamagedFileError(
                f"{path}: damaged phase marker ({exc}); delete it to redo "
                f"that phase, or rerun with --fresh"
            ) from None
        if not isinstance(marker, dict):
            raise DamagedFileError(
                f"{path}: damaged phase marker (not a JSON object); delete "
                "it to redo that phase, or rerun with --fresh"
            )
        return marker

    def rows(self, k: int, name: str) -> list[dict[str, Any]]:
        """The rows of iter_KK/<name>.jsonl (one of the layout's `rows`), read strictly
        (`rzero.io.read_jsonl`); a row file appended to during its phase may end torn."""
        layout = self._layout
        if layout is not None and name not in layout.rows:
            raise ValueError(
                f"{name!r}: the JSONL files of a {layout.name} iteration are "
                f"{', '.join(layout.rows)}"
            )
        if not ROW_NAME.match(name):
            raise ValueError(f"{name!r}: not the name of an iteration's JSONL file")
        torn = name in layout.torn_tail if layout is not None else name.endswith("_steps")
        return read_jsonl(self.iter_dir(k) / f"{name}.jsonl", torn_tail_ok=torn)

    def config(self) -> RZeroConfig:
        saved = self.path / "config.yaml"
        if not saved.is_file():
            raise ConfigError(f"{self.path} is not a run directory (no config.yaml)")
        try:
            raw = yaml.safe_load(saved.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(
                f"{saved}: not valid YAML ({exc}); restore it or rerun with --fresh"
            ) from None
        try:
            return config_from_dict(raw, run_folder=True)
        except ConfigError as exc:
            raise ConfigError(f"{saved}: {exc}") from None

    # ------------------------------------------------------------ writing

    def prepare(self, cfg: RZeroConfig, fresh: bool = False) -> None:
        """Create RUN_DIR, or check that the run there was made with this config (its
        `config.yaml` and the fingerprints in its markers)."""
        if fresh and self.path.exists():
            # everything but the lock this writer holds
            for child in self.path.iterdir():
                if child.name in KEPT_BY_FRESH:
                    continue
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        saved = self.path / "config.yaml"
        if saved.is_file():
            old = self.config()
            if old.fingerprint() != cfg.fingerprint():
                before, after = old.to_dict(), cfg.to_dict()
                changed = [
                    f"{s}.{k}"
                    for s in dict.fromkeys([*before, *after])
                    for k in dict.fromkeys([*before.get(s, {}), *after.get(s, {})])
                    if before.get(s, {}).get(k) != after.get(s, {}).get(k)
                    and fingerprinted(f"{s}.{k}")
                ]
                raise RunDirConflict(
                    f"{self.path} holds a run made with a different config (changed: "
                    f"{', '.join(changed) or 'unknown'}); use another RUN_DIR, or pass "
                    f"--fresh to delete it and start over"
                )
        # a marker an earlier rzero wrote holds the fingerprint of its every-section config
        accepted = (None, cfg.fingerprint(), cfg.legacy_fingerprint())
        for k in self.iterations():
            for phase in self.layout.phases:
                m = self.marker(k, phase)
                if m is not None and m.get("fingerprint") not in accepted:
                    raise RunDirConflict(
                        f"{self.marker_path(k, phase)} was committed by a run with a different "
                        f"config (fingerprint {m['fingerprint']}, this config "
                        f"{cfg.fingerprint()}); use another RUN_DIR, or pass --fresh"
                    )
        self.path.mkdir(parents=True, exist_ok=True)
        write_text_atomic(saved, cfg.to_yaml())

    def commit(
        self, cfg: RZeroConfig, k: int, phase: str, info: dict[str, Any], seconds: float
    ) -> dict[str, Any]:
        """Write the phase's marker (the commit point), and nothing else: the phase runner
        (`rzero.rundir.phases`) calls the loop's hooks after it. The marker records the
        size and SHA-256 of every file the phase wrote (the layout's `outputs`), so a resume can tell
        that they are still what was committed."""
        files = {}
        for out in (self.iter_dir(k) / name for name in self.layout.outputs[phase]):
            for f in sorted(out.rglob("*")) if out.is_dir() else [out]:
                if f.is_file():
                    files[self.relative(f)] = {"size": f.stat().st_size, "sha256": sha256(f)}
        info = {
            "phase": phase,
            "iteration": k,
            "seconds": round(seconds, 3),
            "fingerprint": cfg.fingerprint(),
            **info,
            "outputs": files,
        }
        write_json_atomic(self.marker_path(k, phase), info)
        return info

    def verify(self, cfg: RZeroConfig, *, full: bool = False) -> list[str]:
        """Check every committed phase's outputs against its marker, in run order (sizes;
        also SHA-256 with `full`). At the first mismatch that phase and every phase after it
        are uncommitted (their markers removed) so the loop redoes them. Returns what was
        found, one line each."""
        order = [(k, p) for k in self.iterations() for p in self.layout.phases]
        for n, (k, phase) in enumerate(order):
            m = self.marker(k, phase)
            if m is None:
                continue
            problem = None
            for stored, want in m.get("outputs", {}).items():
                f = Path(self.resolve(stored))
                if not f.is_file():
                    problem = f"{f} is missing"
                elif f.stat().st_size != want["size"]:
                    problem = f"{f} has {f.stat().st_size} bytes, committed with {want['size']}"
                elif full and sha256(f) != want["sha256"]:
                    problem = f"{f} differs from the committed file (SHA-256)"
                if problem:
                    break
            if problem is None:
                continue
            redo = [(kk, pp) for kk, pp in order[n:] if self.marker_path(kk, pp).is_file()]
            for kk, pp in redo:
                self.marker_path(kk, pp).unlink()
            line = (
                f"{problem}: redoing iteration {k} {phase} and the "
                f"{len(redo) - 1} committed phase(s) after it"
            )
            print(f"warning: {line}", file=sys.stderr, flush=True)
            return [line]
        return []

    def best_solver(self, cfg: RZeroConfig) -> dict[str, Any] | None:
        """The evaluated solver with the highest held-out evaluation average (iteration 0 is
        the base model; a tie goes to the earlier iteration), or None before any evaluation.
        ``checkpoint`` is stored as the markers store it (`resolve` reads it)."""
        best = None
        for k in self.iterations():
            m = self.marker(k, "eval")
            if m is None or "average" not in m.get("metrics", {}):
                continue
            if best is None or m["metrics"]["average"] > best["average"]:
                best = {
                    "iteration": k,
                    "checkpoint": m["checkpoint"],
                    "average": m["metrics"]["average"],
                    "benchmarks": {
                        key[: -len("/pass@1")]: v
                        for key, v in m["metrics"].items()
                        if key.endswith("/pass@1")
                    },
                    "chosen_by": "held-out evaluation average (eval.benchmarks), "
                    "highest; ties go to the earlier iteration",
                }
        return best


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
