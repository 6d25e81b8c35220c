"""Fake run directories for the audit's tests: the challenger's step rows and the labelled
pool, written as a math run writes them, with no model."""

from __future__ import annotations

from pathlib import Path

import yaml

from rzero.io import write_jsonl_atomic, write_text_atomic


def step_row(question, label, p_hat=0.5, *, iteration=1, step=0, valid=True):
    return {
        "iteration": iteration,
        "step": step,
        "global_step": (iteration - 1) * 5 + step,
        "question": question,
        "challenger_answer": label,
        "valid": valid,
        "answers": [label] * 10,
        "label": label,
        "p_hat": p_hat,
        "num_groups": 2,
        "top2_margin": 0.2,
        "parse_rate": 1.0,
        "r_unc": 1.0,
        "r_rep": 0.1,
        "reward": 0.9,
    }


def labelled_row(question, label, p_hat=0.5, kept=True):
    return {
        "question": question,
        "answers": [label] * 10,
        "label": label,
        "p_hat": p_hat,
        "num_groups": 2,
        "top2_margin": 0.2,
        "parse_rate": 1.0,
        "kept": kept,
        "groups": {label: 5},
    }


def write_run(
    run_dir: Path, steps: dict[int, list[dict]], labelled: list[dict], iteration: int = 1
) -> Path:
    d = run_dir / f"iter_{iteration:02d}"
    rows = [dict(r, iteration=iteration, step=s) for s, rs in steps.items() for r in rs]
    write_jsonl_atomic(d / "challenger_steps.jsonl", rows)
    write_jsonl_atomic(d / "labelled.jsonl", labelled)
    write_text_atomic(run_dir / "config.yaml", yaml.safe_dump({"run": {"iterations": 1}}))
    return run_dir
