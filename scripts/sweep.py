"""A measured recipe sweep: one-iteration runs of a base recipe with settings changed, scored
on a development benchmark, never on the evaluation items.

    python scripts/sweep.py --config configs/tiny.yaml --dev easy:7 --out runs/sweep \\
        --variant base= --variant solver_lr_3e-5=solver.learning_rate=3e-5 ...

Each variant is `NAME=SECTION.KEY=VALUE[,SECTION.KEY=VALUE...]` (an empty list is the base
recipe). Every variant runs `rzero iterate` with `run.iterations=1` and its evaluation moved to
`--dev` (all its items), in RUN_DIR `OUT/NAME`, resumable like any run; `--jobs 2` runs two at
a time with the torch threads split between them. The table printed at the end (and written to
OUT/sweep.md) has per variant: the challenger's well-formed rate and mean reward per GRPO step
with their fitted slopes, the pool's well-formed count, the questions in the band, the
solver's training reward, and dev pass@1 of the base and of the trained solver with the paired
difference, its 95 % bootstrap interval and the exact McNemar p-value. Below it, every variant
against the first one on the same dev items (`rzero.reports.contrasts`), in a table and in words: the
comparison a choice between settings rests on.

`easy:SEED` is disjoint from `easy` (rzero.evaluation.easy), so a recipe chosen here has not
seen the items its reports evaluate.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def parse_variant(text: str) -> tuple[str, list[str]]:
    name, sep, sets = text.partition("=")
    if not sep or not name:
        raise SystemExit(
            f"--variant {text!r}: expected NAME=SECTION.KEY=VALUE[,...] (NAME= for the base recipe)"
        )
    overrides = [s.strip() for s in sets.split(",") if s.strip()]
    for s in overrides:
        if "=" not in s or "." not in s.split("=", 1)[0]:
            raise SystemExit(f"--variant {name}: {s!r} is not SECTION.KEY=VALUE")
    return name, overrides


def run_variant(
    name: str, overrides: list[str], args: argparse.Namespace, threads: int
) -> tuple[str, int, float]:
    run_dir = Path(args.out) / name
    cmd = [
        sys.executable,
        "-m",
        "rzero",
        "iterate",
        "--config",
        args.config,
        "--run-dir",
        str(run_dir),
        "--set",
        "run.iterations=1",
        "--set",
        f"eval.benchmarks=[{args.dev}]",
        "--set",
        "eval.limit=null",
    ]
    for s in overrides:
        cmd += ["--set", s]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    start = time.time()
    with open(Path(args.out) / f"{name}.log", "w") as log:
        rc = subprocess.call(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    return name, rc, time.time() - start


def summarise(run_dir: Path) -> dict:
    """One sweep row from a run's metrics.jsonl (the slopes are the challenger phase's own) and
    iter_01/eval/increments.json."""
    rows = [
        json.loads(line)
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        if line.strip()
    ]
    steps = [r for r in rows if r.get("phase") == "challenger_step" and r["iteration"] == 1]
    phase = {(r["phase"], r["iteration"]): r for r in rows if r.get("phase") != "challenger_step"}
    challenger, pool, lab, solver = (
        phase.get((name, 1), {}) for name in ("challenger", "pool", "labelling", "solver")
    )
    out = {
        "valid": [r["valid_rate"] for r in steps],
        "valid_slope": challenger.get("valid_rate_slope"),
        "reward": [r["mean_reward"] for r in steps],
        "reward_slope": challenger.get("reward_slope"),
        "pool_valid": pool.get("valid_rate"),
        "pool_kept": pool.get("kept"),
        "in_band": lab.get("kept"),
        "solver_reward": solver.get("mean_reward"),
        "seconds": sum(r.get("seconds", 0.0) for r in phase.values()),
    }
    inc_path = run_dir / "iter_01" / "eval" / "increments.json"
    if inc_path.is_file():
        inc = json.loads(inc_path.read_text())
        it = {i["iteration"]: i for i in inc["iterations"]}
        name = inc["benchmarks"][0]
        d = it[1]["vs_previous"][name]
        out.update(
            dev_base=it[0]["pass@1"][name],
            dev_after=it[1]["pass@1"][name],
            delta=d["delta"],
            ci=(d["ci_low"], d["ci_high"]),
            gained=d["n01"],
            lost=d["n10"],
            mcnemar_p=d["mcnemar_p"],
            n=d["n"],
        )
    return out


def _f(x, fmt="{:.2f}") -> str:
    return "" if x is None else fmt.format(x)


def table(rows: dict[str, tuple[list[str], dict]]) -> str:
    head = (
        "| variant | settings | challenger well-formed per step (slope) | challenger reward "
        "per step (slope) | pool well-formed | in band | solver reward | dev base | "
        "dev after | Δ [95 %] | gained / lost, McNemar p | seconds |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for name, (overrides, r) in rows.items():
        steps = lambda xs: ", ".join(f"{x:.2f}" for x in xs)  # noqa: E731
        delta = (
            ""
            if "delta" not in r
            else (f"{r['delta']:+.3f} [{r['ci'][0]:+.3f}, {r['ci'][1]:+.3f}]")
        )
        mc = "" if "delta" not in r else f"{r['gained']} / {r['lost']}, p = {r['mcnemar_p']:.2f}"
        lines.append(
            f"| {name} | {', '.join(overrides) or 'base recipe'} | {steps(r['valid'])} "
            f"({_f(r['valid_slope'], '{:+.3f}')}) | {steps(r['reward'])} "
            f"({_f(r['reward_slope'], '{:+.3f}')}) | {_f(r['pool_valid'])} | "
            f"{_f(r['in_band'], '{}')} | {_f(r['solver_reward'])} | "
            f"{_f(r.get('dev_base'), '{:.3f}')} | {_f(r.get('dev_after'), '{:.3f}')} | {delta} "
            f"| {mc} | {r['seconds']:.0f} |"
        )
    return head + "\n".join(lines) + "\n"


def contrasts(out: Path, names: list[str]) -> str:
    """Every variant against the first one named (and against its base), as
    `rzero compare` states them; "" with fewer than two finished variants."""
    from rzero.render import markdown_table
    from rzero.reports.contrasts import contrast_table, variant_contrasts
    from rzero.rundir import RunDir

    if len(names) < 2:
        return ""
    c = variant_contrasts([(n, RunDir(out / n)) for n in names], iterations=1)
    header, rows = contrast_table(c)
    return (
        "\n"
        + markdown_table(header, rows)
        + "\n"
        + "".join(f"- {line}\n" for line in c["sentences"])
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument(
        "--dev",
        default="easy:7",
        help="development benchmark (never the evaluation items); default easy:7",
    )
    ap.add_argument("--out", default="runs/sweep")
    ap.add_argument("--variant", action="append", required=True, type=parse_variant)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="torch threads in all, split between the jobs",
    )
    ap.add_argument(
        "--table-only",
        action="store_true",
        help="summarise the finished variants without running anything",
    )
    args = ap.parse_args(argv)
    if args.dev in ("easy", "easy:20251130"):
        raise SystemExit("--dev must not be the evaluation benchmark `easy`; use easy:SEED")
    names = [n for n, _ in args.variant]
    if len(set(names)) != len(names):
        raise SystemExit(f"variant names repeat: {names}")
    if not args.table_only:
        threads = max(1, args.threads // max(1, args.jobs))
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for name, rc, secs in pool.map(lambda v: run_variant(*v, args, threads), args.variant):
                print(f"{name}: rc {rc}, {secs:.0f} s", flush=True)
    rows = {}
    for name, overrides in args.variant:
        run_dir = Path(args.out) / name
        if (run_dir / "metrics.jsonl").is_file():
            rows[name] = (overrides, summarise(run_dir))
    text = table(rows) + contrasts(Path(args.out), list(rows))
    Path(args.out, "sweep.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
