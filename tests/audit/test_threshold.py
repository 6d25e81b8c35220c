"""A measured label accuracy placed on the embedded model's label-accuracy curve
(`rzero.audit.threshold`), in the audit report and the math report."""

from __future__ import annotations

import json
from pathlib import Path

from rzero.audit.report import build_report, render_html, render_markdown
from rzero.audit.threshold import CURVE as MEASURED
from rzero.audit.threshold import EMBEDDED, CurvePoint, threshold_sentence

RECORDS = Path(__file__).resolve().parents[2] / "results" / "label-curve"

CURVE = (
    CurvePoint("shuffled-0", 0.012, -10.2, -14.4, -6.0),
    CurvePoint("noisy-0.5-0", 0.5, 1.0, -3.0, 5.0),
    CurvePoint("noisy-0.7-0", 0.7, 9.0, 5.0, 13.0),
    CurvePoint("truth-0", 1.0, 25.8, 21.5, 30.2),
)


def test_the_embedded_model_gets_the_bracketing_points_and_the_reading():
    line = threshold_sentence(EMBEDDED, 0.6, (0.5, 0.7), curve=CURVE)
    # 0.6 lies between the 0.5 and 0.7 arms; shuffled's interval is below 0 (cost), the
    # 0.7 arm's above 0 (gain), the 0.5 arm's straddles 0 (neither)
    assert "60.0 % [50.0, 70.0] right" in line
    assert "between the measured a = 0.50 (noisy-0.5-0: +1.0 [-3.0, +5.0])" in line
    assert "a = 0.70 (noisy-0.7-0: +9.0 [+5.0, +13.0])" in line
    assert "cost skill measurably up to a = 0.01 and add it from a = 0.70" in line


def test_the_curve_holds_its_records_numbers():
    # every point with a record in results/label-curve/ says what the record measured: the
    # labels' exact accuracy and the last evaluation against the base, in points
    checked = 0
    for p in MEASURED:
        record = RECORDS / p.run
        if not record.is_dir():
            continue
        last = max(record.glob("iter_*/phases/eval.json"))
        d = json.loads(last.read_text())["increment"]["vs_base"]["average"]
        assert (p.delta, p.low, p.high) == tuple(
            round(100 * d[key], 1) for key in ("delta", "ci_low", "ci_high")
        ), p.run
        labelling = json.loads((record / "iter_01" / "phases" / "labelling.json").read_text())
        assert labelling["metrics"]["label_accuracy"] == p.accuracy, p.run
        checked += 1
    assert checked >= 1  # the noisy arms' records are in the repository


def test_an_accuracy_outside_the_measured_range_says_so():
    assert "below every measured point" in threshold_sentence(EMBEDDED, 0.005, curve=CURVE)
    assert "at the measured a = 1.00 (truth-0" in threshold_sentence(EMBEDDED, 1.0, curve=CURVE)


def test_another_model_gets_no_threshold():
    line = threshold_sentence("Qwen/Qwen3-4B-Base", 0.45)
    assert "45.0 % right" in line and "not known for Qwen/Qwen3-4B-Base" in line
    assert "between" not in line and "000 §4.3" in line
    assert threshold_sentence(EMBEDDED, None) is None


def _report(model: str) -> dict:
    items = [
        {
            "source": "labelled_kept",
            "iteration": 1,
            "step": None,
            "global_step": None,
            "question": f"What is {i} + 1?",
            "label": str(i + 1),
            "p_hat": 0.5,
            "kept": True,
            "key": str(i),
            "verdict": "correct" if i < 3 else "wrong",
            "judge_answer": str(i + 1),
            "reason": "",
        }
        for i in range(10)
    ]
    judge = {
        "model": "none (computed answers only)",
        "host": "local",
        "prompt_version": "exact",
        "temperature": 0.0,
        "max_tokens": 0,
        "note": None,
    }
    return build_report(items, judge, {"model": model})


def test_the_audit_report_places_the_accuracy_for_the_embedded_model_only():
    embedded, other = _report(EMBEDDED), _report("meta-llama/Llama-3-8B")
    # 3 of 10 right: 30 % lies between the measured vote (0.186) and truth (1.0) points
    assert "30.0 %" in render_markdown(embedded)
    assert "on the label-accuracy curve of this model" in render_markdown(embedded)
    assert "on the label-accuracy curve of this model" in render_html(embedded)
    assert "on the label-accuracy curve" not in render_markdown(other)
    assert "not known for meta-llama/Llama-3-8B" in render_markdown(other)
