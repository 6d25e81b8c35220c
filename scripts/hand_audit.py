"""A hand audit of a run's kept labels, where no judge model is served: a seeded random
sample of one iteration's kept questions, each read by a person who writes a verdict.

    python scripts/hand_audit.py sample RUN_DIR ITERATION N [--seed S] > audit.jsonl
    # fill in each row's "verdict" (correct | wrong | ill_posed) and "answer"
    python scripts/hand_audit.py summary audit.jsonl

`sample` writes N rows (the question, its majority-vote label and the vote counts; verdict
and answer empty), drawn from the iteration's kept questions (`labelled.jsonl`, kept in the
band) by `random.Random(S).shuffle`, so the same command draws the same sample. A row is
`ill_posed` when the question has no single well-defined answer (missing or contradictory
information, not a question); else `correct` or `wrong` as the label equals the answer the
reader works out. `summary` prints the share of ill-posed questions and the labels'
accuracy among the well-posed ones, each with its 95 % Wilson interval, and refuses a file
with an unfilled or unknown verdict. This is the judge audit of SPEC §3 done by a person:
the rubric is the judge prompt's (`rzero.audit.judge.JUDGE_PROMPT`).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from rzero.rundir import RunDir
from rzero.stats import wilson_interval

VERDICTS = ("correct", "wrong", "ill_posed")


def sample(run_dir: Path, iteration: int, n: int, seed: int = 0) -> list[dict]:
    """N kept questions of the iteration, in a seeded random order, with empty verdicts."""
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


def summary(rows: list[dict]) -> dict:
    """Counts and 95 % Wilson intervals of a filled-in audit."""
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


def words(s: dict) -> str:
    def share(k: int, n: int, ci) -> str:
        return f"{k}/{n} ({k / n:.0%}, 95 % [{ci[0]:.0%}, {ci[1]:.0%}])"

    text = f"ill-posed: {share(s['ill_posed'], s['n'], s['ill_posed_ci'])}"
    if s["well_posed"]:
        text += (
            "; labels right among the well-posed: "
            f"{share(s['correct'], s['well_posed'], s['accuracy_ci'])}"
        )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("sample", help="a seeded sample of an iteration's kept questions")
    p.add_argument("run_dir", type=Path)
    p.add_argument("iteration", type=int)
    p.add_argument("n", type=int)
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("summary", help="the filled-in audit's counts and intervals")
    p.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "sample":
            for row in sample(args.run_dir, args.iteration, args.n, args.seed):
                print(json.dumps(row, ensure_ascii=False))
        else:
            rows = [json.loads(line) for line in args.file.read_text().splitlines() if line]
            print(words(summary(rows)))
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
