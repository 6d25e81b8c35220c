"""A hand audit of a run's kept labels, where no judge model is served: a seeded random
sample of one iteration's kept questions, each read by a person who writes a verdict
(`scripts/hand_audit.py` draws and sums it up), and the place a comparison finds it.

A row is `ill_posed` when the question has no single well-defined answer (missing or
contradictory information, not a question); else `correct` or `wrong` as the label equals
the answer the reader works out. This is the judge audit of SPEC §3 done by a person: the
rubric is the judge prompt's (`rzero.audit.judge.JUDGE_PROMPT`).

A filled-in audit of run NAME's iteration K is kept as `hand-audit/NAME-iterKK.jsonl` beside
the run folder or its record (`results/claims/hand-audit/loop-0-iter01.jsonl`); `rzero
compare` and `rzero ablate` show it in their context table (`find`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rzero.rundir import RunDir
from rzero.stats import wilson_interval

VERDICTS = ("correct", "wrong", "ill_posed")
FOLDER = "hand-audit"


def sample(run_dir: Path, iteration: int, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """N kept questions of the iteration (`labelled.jsonl`, kept in the band), in the order
    `random.Random(seed).shuffle` gives them, with empty verdicts: the same call draws the
    same sample."""
    rows = [r for r in RunDir(run_dir).rows(iteration, "labelled") if r.get("kept")]
    random.Random(seed).shuffle(rows)
    return [
        {
            "run": str(run_dir),
            "iteration": iteration,
            "seed": seed,
            "question": r["question"],
            "label": r["label"],
            "votes": r.get("groups"),
            "verdict": None,
            "answer": None,
        }
        for r in rows[:n]
    ]


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts and 95 % Wilson intervals of a filled-in audit: the share of ill-posed
    questions, and the labels' accuracy among the well-posed ones. A row with an unfilled or
    unknown verdict is a ValueError naming it."""
    bad = [i for i, r in enumerate(rows, 1) if r.get("verdict") not in VERDICTS]
    if bad:
        raise ValueError(
            f"rows {', '.join(map(str, bad[:10]))}: verdict must be one of {', '.join(VERDICTS)}"
        )
    n = len(rows)
    ill = sum(r["verdict"] == "ill_posed" for r in rows)
    right = sum(r["verdict"] == "correct" for r in rows)
    posed = n - ill
    return {
        "n": n,
        "ill_posed": ill,
        "ill_posed_ci": wilson_interval(ill, n) if n else None,
        "well_posed": posed,
        "correct": right,
        "accuracy": right / posed if posed else None,
        "accuracy_ci": wilson_interval(right, posed) if posed else None,
    }


def words(s: dict[str, Any]) -> str:
    """`ill-posed: 25/40 (62%, 95 % [47%, 76%]); labels right among the well-posed: ...`"""

    def share(k: int, n: int, ci: tuple[float, float]) -> str:
        return f"{k}/{n} ({k / n:.0%}, 95 % [{ci[0]:.0%}, {ci[1]:.0%}])"

    text = f"ill-posed: {share(s['ill_posed'], s['n'], s['ill_posed_ci'])}"
    if s["well_posed"]:
        text += (
            "; labels right among the well-posed: "
            f"{share(s['correct'], s['well_posed'], s['accuracy_ci'])}"
        )
    return text


def read(path: Path) -> list[dict[str, Any]]:
    """The rows of a hand-audit file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def find(folders: Iterable[Path], name: str, iteration: int) -> dict[str, Any] | None:
    """The summary of run `name`'s hand audit of `iteration`, from the first of `folders`
    whose hand-audit/ holds it, with its file; None where none does. A file that cannot be
    read or is not filled in is a ValueError naming it: a comparison does not leave out a
    person's audit in silence."""
    for folder in folders:
        path = folder / FOLDER / f"{name}-iter{iteration:02d}.jsonl"
        if path.is_file():
            try:
                return summary(read(path)) | {"file": str(path)}
            except (ValueError, KeyError) as exc:
                raise ValueError(f"hand audit {path}: {exc}") from exc
    return None
