"""A run's finding in one line (rzero.reports.headline): the pure function on hand-made
increment curves, its reading of a run folder written by hand, and what `rzero iterate`
ends with (report.md's first line, then the page's absolute path), a resumed run included."""

import json
import shutil

import pytest
import yaml
from conftest import tiny_overrides

from rzero.cli import main
from rzero.cli.commands import finished
from rzero.cli.systems import SYSTEMS
from rzero.config import load_config
from rzero.math.layout import LAYOUT
from rzero.reports.headline import base_side, headline, run_headline, warning_counts
from rzero.rundir import RunDir
from rzero.selfplay.increments import increment_curve


def _diff(delta, lo, hi, p=None) -> dict:
    return {"delta": delta, "ci_low": lo, "ci_high": hi, "n": 480, "mcnemar_p": p}


def _curve(scores: list[float], vs_base: dict) -> dict:
    """increments.json's shape, one benchmark `easy`, the last iteration against the base."""
    entries = [{"iteration": k, "pass@1": {"easy": s, "average": s}} for k, s in enumerate(scores)]
    entries[-1]["vs_base"] = {"easy": vs_base, "average": vs_base}
    return {"benchmarks": ["easy"], "iterations": entries}


def test_the_finding_gives_start_and_end_the_interval_against_the_base_and_the_warnings():
    # 0.200 -> 0.231 -> 0.156; the last minus the base: 0.156 - 0.200 = -0.044 -> -4.4 points
    curve = _curve([0.200, 0.231, 0.156], _diff(-0.044, -0.113, 0.025, 0.23))
    assert headline(curve, collapse=3, audit=0) == (
        "Finding: easy pass@1 20.0 % -> 23.1 % -> 15.6 % (iterations 0-2); iteration 2 "
        "against the base model -4.4 points [-11.3, +2.5] (McNemar p 0.23): within the "
        "evaluation noise (the paired 95 % interval includes 0); 3 collapse-watch "
        "warnings, 0 audit warnings."
    )


def test_an_interval_is_read_as_rzero_compare_reads_it():
    assert base_side(_diff(-0.056, -0.106, -0.013)) == "below"  # the whole interval < 0
    assert base_side(_diff(0.258, 0.215, 0.302, 4e-6)) == "above"  # > 0, McNemar rejects
    assert base_side(_diff(0.027, -0.008, 0.065)) == "within"  # it holds 0
    assert base_side(_diff(0.0, 0.0, 0.0)) == "none"  # no item changed
    # the interval excludes 0 but McNemar's exact test does not reject: borderline, as the
    # comparison says it (the tiny R-Few run: +6.9 [+0.6, +13.1], p 0.061)
    borderline = _diff(0.069, 0.006, 0.131, 0.061)
    assert base_side(borderline) == "borderline"
    line = headline(_curve([0.2, 0.269, 0.269], borderline))
    assert "(McNemar p 0.061): borderline (the paired 95 % interval excludes 0 but" in line
    below = headline(_curve([0.212, 0.156], _diff(-0.056, -0.106, -0.013)), collapse=1)
    assert "-5.6 points [-10.6, -1.3]: below it, outside the evaluation noise" in below
    assert "1 collapse-watch warning, 0 audit warnings" in below


def test_several_benchmarks_give_their_average_and_a_long_curve_its_ends():
    vs = _diff(0.01, -0.02, 0.04)
    entries = [
        {"iteration": k, "pass@1": {"a": 0.1, "b": 0.3, "average": 0.2 + k / 100}} for k in range(8)
    ]
    entries[-1]["vs_base"] = {"a": vs, "b": vs, "average": vs}
    text = headline({"benchmarks": ["a", "b"], "iterations": entries})
    # eight scores: the first two, then the last three
    assert "average pass@1 of a, b 20.0 % -> 21.0 % -> ... -> 25.0 % -> 26.0 % -> 27.0 %" in text
    assert "(iterations 0-7)" in text


def test_without_a_curve_the_finding_says_what_there_is():
    assert headline(None, base=0.283).startswith(
        "Finding: only iteration 0 (the base model) evaluated so far: average pass@1 28.3 %;"
    )
    off = headline(None, note="no evaluation: eval.enabled is off", other=1)
    assert off == (
        "Finding: no evaluation: eval.enabled is off; 0 collapse-watch warnings, "
        "0 audit warnings, 1 other warning."
    )
    start = headline(_curve([0.63, 0.60], _diff(-0.03, -0.06, 0.0)), start="θ_0 (plateau)")
    assert "iteration 1 against θ_0 (plateau) -3.0 points" in start


def _hand_run(tmp_path, scores: list[list[int]]) -> RunDir:
    """A math run folder with an evaluation per iteration, its increment curve, and
    markers with warnings: 2 in the pool's, 1 in the audit's, the loop's own in the
    labelling's."""
    path = tmp_path / "run"
    cfg = load_config(None, [f"run.iterations={len(scores) - 1}", "eval.benchmarks=[easy]"])
    path.mkdir()
    (path / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict()))
    run = RunDir(path, LAYOUT)

    def marker(k, phase, **info):
        (path / f"iter_{k:02d}" / "phases").mkdir(parents=True, exist_ok=True)
        run.marker_path(k, phase).write_text(json.dumps({"seconds": 1.0, **info}))

    for k, row in enumerate(scores):
        marker(k, "eval", metrics={"average": sum(row) / len(row)}, warnings=[])
    curve = increment_curve({"easy": scores})
    (path / f"iter_{len(scores) - 1:02d}" / "eval").mkdir(parents=True)
    (path / f"iter_{len(scores) - 1:02d}" / "eval" / "increments.json").write_text(
        json.dumps(curve)
    )
    marker(1, "pool", warnings=["structure: a", "diversity: b"])
    marker(1, "labelling", warning="iteration 1: no pooled question fell in the band")
    marker(1, "audit", warnings=["label_accuracy: c"])
    return run


def test_a_run_folder_gives_the_curve_it_holds_and_each_warning_once(tmp_path):
    scores = [[1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]]  # 40 %, 60 %, 20 %
    run = _hand_run(tmp_path, scores)
    assert warning_counts(run, LAYOUT.phases) == {"collapse": 2, "audit": 1, "other": 1}
    curve = json.loads((run.iter_dir(2) / "eval" / "increments.json").read_text())
    d = curve["iterations"][2]["vs_base"]["average"]  # 0.2 - 0.4 = -0.2
    assert d["delta"] == pytest.approx(-0.2)
    text = run_headline(run)
    assert text == headline(curve, collapse=2, audit=1, other=1)
    assert "easy pass@1 40.0 % -> 60.0 % -> 20.0 %" in text
    assert f"{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}]" in text


def test_iterate_ends_with_the_finding_and_the_absolute_path_of_the_page(tmp_path):
    run = _hand_run(tmp_path, [[1, 0, 0, 0], [1, 1, 0, 0]])
    cfg = run.config()
    lines = finished(SYSTEMS["math"], cfg, run.path).splitlines()
    assert lines == [
        f"run finished: {run.path}",
        run_headline(run, cfg),
        f"report: {(run.path / 'report.html').resolve()}",
    ]


def test_report_md_opens_with_the_finding_and_a_resumed_run_prints_it(
    one_iteration, format_checkpoint, tmp_path, capsys
):
    run_dir = tmp_path / "run"
    shutil.copytree(one_iteration, run_dir)
    first = (run_dir / "report.md").read_text().splitlines()[0]
    assert first == run_headline(RunDir(run_dir, LAYOUT))
    assert first.startswith("Finding: synthetic pass@1 ")
    sets = [a for o in tiny_overrides(format_checkpoint) for a in ("--set", o)]
    assert main(["iterate", "--run-dir", str(run_dir), *sets]) == 0  # nothing left to do
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [first, f"report: {(run_dir / 'report.html').resolve()}"]
