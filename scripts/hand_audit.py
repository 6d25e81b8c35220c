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
the rubric is the judge prompt's (`rzero.audit.judge.JUDGE_PROMPT`). Keep the filled-in file
as hand-audit/RUN-iterKK.jsonl beside the run folder or its record: `rzero compare` and
`rzero ablate` then show it (`rzero.audit.hand`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rzero.audit.hand import read, sample, summary, words


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
            print(words(summary(read(args.file))))
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
