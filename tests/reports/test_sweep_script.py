"""scripts/sweep.py: a sweep row is read from a run's own files, and the evaluation items are
refused as its development benchmark."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "sweep", Path(__file__).parents[2] / "scripts" / "sweep.py"
)
sweep = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sweep)


def _run(tmp_path: Path, valid: list[float]) -> Path:
    run = tmp_path / "run"
    (run / "iter_01" / "eval").mkdir(parents=True)
    rows = [{"iteration": 0, "phase": "eval", "seconds": 10.0}]
    rows += [
        {
            "iteration": 1,
            "phase": "challenger_step",
            "step": i,
            "valid_rate": v,
            "mean_reward": v / 2,
        }
        for i, v in enumerate(valid)
    ]
    rows += [
        {
            "iteration": 1,
            "phase": "challenger",
            "seconds": 100.0,
            "valid_rate_slope": 0.25,
            "reward_slope": 0.125,
        },
        {"iteration": 1, "phase": "pool", "seconds": 5.0, "valid_rate": 0.75, "kept": 24},
        {"iteration": 1, "phase": "labelling", "seconds": 20.0, "kept": 7},
        {"iteration": 1, "phase": "solver", "seconds": 50.0, "mean_reward": 0.3},
        {"iteration": 1, "phase": "eval", "seconds": 10.0},
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    diff = {
        "n": 320,
        "delta": 0.0125,
        "ci_low": -0.01,
        "ci_high": 0.04,
        "n01": 9,
        "n10": 5,
        "mcnemar_p": 0.42,
    }
    (run / "iter_01" / "eval" / "increments.json").write_text(
        json.dumps(
            {
                "benchmarks": ["easy:7"],
                "iterations": [
                    {"iteration": 0, "pass@1": {"easy:7": 0.2}},
                    {"iteration": 1, "pass@1": {"easy:7": 0.2125}, "vs_previous": {"easy:7": diff}},
                ],
            }
        )
    )
    return run


def test_a_sweep_row_holds_the_runs_own_numbers(tmp_path):
    row = sweep.summarise(_run(tmp_path, [0.25, 0.5, 0.75]))
    assert row["valid"] == [0.25, 0.5, 0.75] and row["valid_slope"] == pytest.approx(0.25)
    assert row["reward_slope"] == pytest.approx(0.125)
    assert (row["pool_valid"], row["in_band"], row["solver_reward"]) == (0.75, 7, 0.3)
    assert (row["dev_base"], row["dev_after"], row["gained"], row["lost"]) == (0.2, 0.2125, 9, 5)
    assert row["seconds"] == pytest.approx(195.0)
    text = sweep.table({"lr": (["solver.learning_rate=3e-5"], row)})
    assert "| lr | solver.learning_rate=3e-5 | 0.25, 0.50, 0.75 (+0.250) |" in text
    assert "+0.013 [-0.010, +0.040] | 9 / 5, p = 0.42 | 195 |" in text


def test_variants_parse_and_bad_ones_are_refused():
    assert sweep.parse_variant("base=") == ("base", [])
    assert sweep.parse_variant("x=solver.steps=4, labeling.num_votes=16") == (
        "x",
        ["solver.steps=4", "labeling.num_votes=16"],
    )
    with pytest.raises(SystemExit, match="SECTION.KEY=VALUE"):
        sweep.parse_variant("x=steps=4")
    with pytest.raises(SystemExit, match="NAME="):
        sweep.parse_variant("base")


def test_the_evaluation_items_are_refused_as_the_development_benchmark(tmp_path):
    with pytest.raises(SystemExit, match="must not be the evaluation benchmark"):
        sweep.main(
            [
                "--config",
                "configs/tiny.yaml",
                "--dev",
                "easy",
                "--out",
                str(tmp_path),
                "--variant",
                "base=",
            ]
        )


def _evaluated(root: Path, name: str, scores: list[list[int]]) -> None:
    for k, row in enumerate(scores):
        it = root / name / f"iter_{k:02d}"
        (it / "eval").mkdir(parents=True)
        (it / "phases").mkdir()
        items = [
            {"benchmark": "easy:7", "id": f"e-{i}", "mean": float(s)} for i, s in enumerate(row)
        ]
        (it / "eval" / "eval.json").write_text(json.dumps({"items": items}))
        (it / "phases" / "eval.json").write_text(json.dumps({"metrics": {}, "seconds": 1.0}))


def test_the_sweep_compares_every_variant_with_the_first(tmp_path):
    _evaluated(tmp_path, "base", [[0] * 40, [0] * 40])
    _evaluated(tmp_path, "lr", [[0] * 40, [1] * 30 + [0] * 10])
    text = sweep.contrasts(tmp_path, ["base", "lr"])
    assert "| 1 | base | (the reference) |" in text
    line = next(x for x in text.splitlines() if x.startswith("- iteration 1, lr minus base:"))
    assert "pass@1 +0.750 [" in line and "over 40 items (30 gained, 0 lost" in line
    assert "outside the evaluation noise, above" in line
    assert sweep.contrasts(tmp_path, ["base"]) == ""
