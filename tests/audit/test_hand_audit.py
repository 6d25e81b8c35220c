"""scripts/hand_audit.py: the sample is the same seeded draw of the kept questions every time,
and the summary counts ill-posed questions apart from the labels it can check."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from fake_runs import labelled_row, write_run

from rzero.stats import wilson_interval

_SPEC = importlib.util.spec_from_file_location(
    "hand_audit", Path(__file__).parents[2] / "scripts" / "hand_audit.py"
)
hand_audit = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(hand_audit)


def _run(tmp_path: Path) -> Path:
    labelled = [labelled_row(f"q{i}", str(i), kept=i % 3 != 0) for i in range(30)]
    return write_run(tmp_path / "run", {}, labelled)


def test_the_sample_is_a_seeded_draw_of_the_kept_questions(tmp_path):
    run = _run(tmp_path)
    first = hand_audit.sample(run, 1, 8, seed=3)
    assert first == hand_audit.sample(run, 1, 8, seed=3)
    assert first != hand_audit.sample(run, 1, 8, seed=4)
    assert len(first) == 8 and len({r["question"] for r in first}) == 8
    assert all(int(r["question"][1:]) % 3 != 0 for r in first)  # kept only
    assert all(r["verdict"] is None and r["label"] == r["question"][1:] for r in first)
    assert len(hand_audit.sample(run, 1, 100)) == 20  # every kept question, no more


def test_the_summary_counts_ill_posed_questions_apart(tmp_path):
    rows = [{"verdict": v} for v in ["ill_posed"] * 5 + ["correct"] * 2 + ["wrong"] * 3]
    s = hand_audit.summary(rows)
    assert (s["n"], s["ill_posed"], s["well_posed"], s["correct"]) == (10, 5, 5, 2)
    assert s["accuracy"] == 0.4 and s["accuracy_ci"] == wilson_interval(2, 5)
    assert s["ill_posed_ci"] == wilson_interval(5, 10)
    assert hand_audit.words(s) == (
        "ill-posed: 5/10 (50%, 95 % [24%, 76%]); "
        "labels right among the well-posed: 2/5 (40%, 95 % [12%, 77%])"
    )
    with pytest.raises(ValueError, match="rows 2: verdict must be one of"):
        hand_audit.summary([{"verdict": "wrong"}, {"verdict": None}])


def test_an_unfilled_audit_is_one_error_line(tmp_path, capsys):
    run = _run(tmp_path)
    assert hand_audit.main(["sample", str(run), "1", "4"]) == 0
    audit = tmp_path / "audit.jsonl"
    audit.write_text(capsys.readouterr().out)
    assert len(audit.read_text().splitlines()) == 4
    assert hand_audit.main(["summary", str(audit)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "verdict must be one of" in err[0]
    rows = [dict(json.loads(line), verdict="ill_posed") for line in audit.read_text().splitlines()]
    audit.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert hand_audit.main(["summary", str(audit)]) == 0
    assert capsys.readouterr().out.startswith("ill-posed: 4/4 (100%")
