"""A finished run's record: its folder without the model weights, small enough to keep in
version control, move to another machine and read there like the run itself.

A grid of runs that takes longer than one machine stays up (the claims grid: about 3 hours an
arm on 2 CPU cores) keeps each finished arm's record (`rzero ablate --records DIR`); on a
new machine the same command reads the records of the arms already finished and runs only
the others. A record holds everything the reports and `rzero compare` read (config.yaml,
the phase markers, every iteration's rows and evaluations, the report itself); it drops
every checkpoint (a folder holding a weight file: its weights, tokenizer and optimizer
state) and the folder's lock, and lists what it dropped in RECORD_FILE with their sizes.
A record cannot be resumed or trained on: its checkpoints are gone. Rerun the arm itself
to get them back.

    DIR/record.json   {"fingerprint", "from", "recorded_on": {cpu, cores, torch},
                       "dropped": {path: size}}
    DIR/...           the run folder's other files, at their own paths

`rzero ablate` keeps a record on the machine the arm ran on, right after it finished, so
`recorded_on` names that machine: bf16 arithmetic differs between CPUs, so a base model's
greedy answers can differ by a few items, and arms recorded on different machines pair
only up to that (`rzero compare` counts the items their base evaluations score differently).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from rzero.config import RZeroConfig
from rzero.engine.models import cpu_model
from rzero.io import DamagedFileError, write_json_atomic
from rzero.rundir.folder import LOCK_FILE, RunDir

RECORD_FILE = "record.json"
# model and optimizer states: a folder holding one is a checkpoint, dropped whole
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt")


def _checkpoints(run_dir: Path) -> set[Path]:
    """The folders under `run_dir` that hold a weight file directly."""
    return {f.parent for f in run_dir.rglob("*") if f.is_file() and f.suffix in WEIGHT_SUFFIXES}


def _dropped(path: Path, run_dir: Path, checkpoints: set[Path]) -> bool:
    if path.relative_to(run_dir).parts == (LOCK_FILE,):
        return True
    return path.suffix in WEIGHT_SUFFIXES or any(p in checkpoints for p in path.parents)


def keep_record(run_dir: str | Path, to: str | Path) -> Path:
    """Write the record of the run in `run_dir` to `to` (replacing a record there; `to`
    must not be `run_dir` or inside it). Returns `to`."""
    import torch  # only for its version: reading a record needs no torch

    run_dir, to = Path(run_dir), Path(to)
    cfg = RunDir(run_dir).config()  # ConfigError unless it is a run folder
    if to.resolve() == run_dir.resolve() or run_dir.resolve() in to.resolve().parents:
        raise ValueError(f"{to}: a run's record goes outside its folder {run_dir}")
    checkpoints = _checkpoints(run_dir)
    staging = to.with_name(to.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    dropped: dict[str, int] = {}
    for f in sorted(run_dir.rglob("*")):
        if not f.is_file():
            continue
        rel = f.relative_to(run_dir)
        if _dropped(f, run_dir, checkpoints):
            dropped[str(rel)] = f.stat().st_size
            continue
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, staging / rel)
    write_json_atomic(
        staging / RECORD_FILE,
        {
            "fingerprint": cfg.fingerprint(),
            "from": str(run_dir),
            "recorded_on": {
                "cpu": cpu_model(),
                "cores": os.cpu_count(),
                "torch": torch.__version__,
            },
            "dropped": dropped,
        },
    )
    if to.exists():
        shutil.rmtree(to)
    staging.rename(to)
    return to


def read_record(path: str | Path) -> dict[str, Any] | None:
    """The record.json of the record at `path`, or None where there is none."""
    f = Path(path) / RECORD_FILE
    if not f.is_file():
        return None
    try:
        record = json.loads(f.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DamagedFileError(f"{f}: damaged record ({exc}); delete the record") from None
    if not isinstance(record, dict) or "fingerprint" not in record:
        raise DamagedFileError(f"{f}: damaged record (no fingerprint); delete the record")
    return record


def record_of(path: str | Path, cfg: RZeroConfig) -> str | None:
    """Why the record at `path` is not one of a run of `cfg` (no record; another config),
    or None when it is."""
    record = read_record(path)
    if record is None:
        return f"no record in {path}"
    if record["fingerprint"] not in (cfg.fingerprint(), cfg.legacy_fingerprint()):
        return (
            f"the record in {path} is of another config (fingerprint "
            f"{record['fingerprint']}, this config {cfg.fingerprint()})"
        )
    return None
