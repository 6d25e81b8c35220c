"""Paired differences between variants (rzero.reports.contrasts) on run folders written by hand: the
counts are checked against a direct count, the intervals against rzero.stats, and the words
against which side of 0 each interval lies."""

import json
import shutil

import numpy as np
import pytest
import yaml

from rzero.cli import main
from rzero.config import load_config
from rzero.reports.comparison import build_comparison
from rzero.reports.comparison_page import (
    _wilson_bar,
    label_points,
    render_html,
    render_markdown,
)
from rzero.reports.contrasts import (
    contrast_table,
    paired_eval,
    side,
    variant_contrasts,
    variant_lines,
)
from rzero.rundir import RunDir
from rzero.stats import paired_difference, wilson_interval


def _eval(scores: dict[str, list[int]], order=None) -> dict:
    items = [
        {"benchmark": b, "id": f"{b}-{i}", "mean": float(s)}
        for b, row in scores.items()
        for i, s in enumerate(row)
    ]
    if order is not None:
        items = [items[i] for i in order]
    return {"items": items}


def _run(tmp_path, name: str, evals: list[dict], iterations: int = 2) -> RunDir:
    path = tmp_path / name
    cfg = load_config(None, [f"run.iterations={iterations}"])
    path.mkdir()
    (path / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict()))
    for k, ev in enumerate(evals):
        (path / f"iter_{k:02d}" / "eval").mkdir(parents=True)
        (path / f"iter_{k:02d}" / "phases").mkdir()
        (path / f"iter_{k:02d}" / "eval" / "eval.json").write_text(json.dumps(ev))
        average = float(np.mean([item["mean"] for item in ev["items"]]))
        (path / f"iter_{k:02d}" / "phases" / "eval.json").write_text(
            json.dumps({"metrics": {"average": average}, "seconds": 1.0})
        )
    return RunDir(path)


def test_iteration_0_is_named_for_what_it_evaluated(tmp_path):
    from rzero.reports.contrasts import start_of

    ev = _eval({"easy": [1, 0, 1]})
    runs = [(n, _run(tmp_path, n, [ev, ev])) for n in ("spin", "sft")]
    assert start_of(runs) == "the base model"  # markers without a checkpoint: the base
    for _, run in runs:  # each run evaluated its own SFT plateau at iteration 0
        marker = run.path / "iter_00" / "phases" / "eval.json"
        m = json.loads(marker.read_text())
        marker.write_text(json.dumps(m | {"checkpoint": "run:iter_00/plateau"}))
    assert start_of(runs) == "θ_0 (iter_00/plateau of each run)"
    c = variant_contrasts(runs, iterations=1)
    assert any("minus iteration 0 (θ_0 (iter_00/plateau of each run))" in t for t in c["sentences"])
    assert "θ_0" in contrast_table(c)[0][4]
    marker = runs[1][1].path / "iter_00" / "phases" / "eval.json"
    marker.write_text(json.dumps({"metrics": {"average": 2 / 3}, "checkpoint": "/models/base"}))
    assert start_of(runs) == "the base model"  # not one start for all


def test_paired_eval_matches_items_by_id_and_counts_gains_and_losses():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, 200).tolist()
    b = rng.integers(0, 2, 200).tolist()
    shuffled = rng.permutation(200).tolist()
    d = paired_eval(_eval({"easy": a}), _eval({"easy": b}, order=shuffled))
    avg = d["average"]
    assert avg["n01"] == sum(x == 0 and y == 1 for x, y in zip(a, b, strict=True))
    assert avg["n10"] == sum(x == 1 and y == 0 for x, y in zip(a, b, strict=True))
    assert avg["delta"] == pytest.approx(np.mean(b) - np.mean(a))
    ref = paired_difference(a, b)
    assert (avg["ci_low"], avg["ci_high"]) == pytest.approx((ref.ci_low, ref.ci_high))


def test_paired_eval_keeps_only_shared_items_and_stratifies_two_benchmarks():
    a = _eval({"x": [1, 0, 0, 1], "y": [0, 0]})
    b = _eval({"x": [1, 1, 0], "y": [1, 1]})  # x-3 missing: left out
    d = paired_eval(a, b)
    assert d["benchmarks"]["x"]["n"] == 3 and d["benchmarks"]["y"]["n"] == 2
    # the average is the unweighted mean over benchmarks: x +1/3, y +1
    assert d["average"]["delta"] == pytest.approx((1 / 3 + 1) / 2)
    assert paired_eval(_eval({"x": [1]}), _eval({"z": [1]})) is None


@pytest.mark.parametrize(
    ("low", "high", "delta", "p", "word"),
    [
        (0.01, 0.05, 0.03, None, "above"),
        (-0.05, -0.01, -0.03, None, "below"),
        (-0.01, 0.02, 0.005, None, "within"),
        (0.0, 0.0, 0.0, None, "none"),
        (0.01, 0.05, 0.03, 0.01, "above"),
        (0.003, 0.027, 0.013, 0.12, "borderline"),
        (-0.027, -0.003, -0.013, 0.06, "borderline"),
        (-0.01, 0.02, 0.005, 0.5, "within"),
    ],
)
def test_side_of_zero(low, high, delta, p, word):
    assert side({"ci_low": low, "ci_high": high, "delta": delta, "mcnemar_p": p}) == word


def test_few_changed_items_are_borderline_not_outside_the_noise():
    # 5 items gained, none lost, of 300: the bootstrap interval excludes 0, McNemar p = 0.0625
    d = paired_eval(_eval({"easy": [0] * 300}), _eval({"easy": [1] * 5 + [0] * 295}))["average"]
    assert d["ci_low"] > 0 and d["mcnemar_p"] == pytest.approx(0.0625)
    assert side(d) == "borderline"


def test_variant_contrasts_say_which_differences_are_outside_the_noise(tmp_path):
    n = 300
    base = [1] * 60 + [0] * 240
    better = [1] * 120 + [0] * 180  # +20 points: far outside the noise
    same = [1] * 59 + [0, 1] + [0] * 239  # one item lost, one gained
    ref = _run(tmp_path, "separate", [_eval({"easy": base})] * 2 + [_eval({"easy": base})])
    other = _run(
        tmp_path, "shared", [_eval({"easy": base}), _eval({"easy": better}), _eval({"easy": same})]
    )
    c = variant_contrasts([("separate", ref), ("shared", other)], iterations=2)
    assert c["reference"] == "separate"
    assert c["base_check"] == {"shared": {"missing": False, "unshared": 0, "differing": 0}}
    rows = {(r["iteration"], r["variant"]): r for r in c["rows"]}
    assert rows[1, "separate"]["vs_reference"] is None
    assert rows[1, "shared"]["vs_reference"]["average"]["delta"] == pytest.approx(60 / n)
    assert rows[1, "shared"]["vs_base"]["average"]["delta"] == pytest.approx(60 / n)
    assert rows[1, "separate"]["vs_base"]["average"]["n01"] == 0  # no change at all
    text = "\n".join(c["sentences"])
    assert (
        "iteration 1, shared minus separate: pass@1 +0.200" in text and "60 gained, 0 lost" in text
    )
    first = c["sentences"][0]
    assert (
        first.startswith("iteration 1, shared minus")
        and "outside the evaluation noise, above" in first
    )
    assert "iteration 1, shared minus iteration 0 (the base model): pass@1 +0.200" in text
    assert "iteration 2, shared minus separate: pass@1 +0.000" in text
    assert text.count("within the evaluation noise") == 2  # iteration 2: vs separate, vs base
    assert text.count("no item's score differs") == 2  # separate against its base, twice
    assert "4 differences with items that changed, 2 outside the evaluation noise" in text
    assert "do not cover how much a variant moves with its seed" in text
    header, table = contrast_table(c)
    assert len(table) == 4 and table[0][2] == "(the reference)"
    assert header[2].startswith("vs separate")


def test_different_base_evaluations_are_said_and_each_variant_meets_its_own_base(tmp_path):
    a = _run(tmp_path, "a", [_eval({"easy": [1, 0, 0, 0]}), _eval({"easy": [1, 1, 0, 0]})], 1)
    b = _run(tmp_path, "b", [_eval({"easy": [1, 1, 1, 0]}), _eval({"easy": [1, 1, 0, 0]})], 1)
    c = variant_contrasts([("a", a), ("b", b)], iterations=1)
    assert c["base_check"] == {"b": {"missing": False, "unshared": 0, "differing": 2}}
    assert "2 items scored differently and 0 items scored by only one" in c["sentences"][-1]
    rows = {r["variant"]: r for r in c["rows"]}
    assert rows["a"]["vs_base"]["average"]["delta"] == pytest.approx(+0.25)
    assert rows["b"]["vs_base"]["average"]["delta"] == pytest.approx(-0.25)  # its own base
    assert rows["b"]["vs_reference"]["average"]["delta"] == 0


def test_unshared_or_missing_base_evaluations_are_said(tmp_path):
    a = _run(tmp_path, "a", [_eval({"easy": [1, 0, 0]}), _eval({"easy": [1, 1, 0]})], 1)
    b = _run(tmp_path, "b", [_eval({"easy": [1, 0]}), _eval({"easy": [1, 1, 0]})], 1)
    c = variant_contrasts([("a", a), ("b", b)], iterations=1)
    assert c["base_check"]["b"] == {"missing": False, "unshared": 1, "differing": 0}
    assert "1 items scored by only one of them" in c["sentences"][-1]
    shutil.rmtree(a.iter_dir(0) / "phases")  # not committed: as good as missing
    c = variant_contrasts([("a", a), ("b", b)], iterations=1)
    assert c["base_check"]["b"] == {"missing": True}
    assert "of a or b is missing" in c["sentences"][-1]


def test_a_missing_evaluation_is_a_dash_not_an_error(tmp_path):
    a = _run(tmp_path, "a", [_eval({"easy": [1, 0]}), _eval({"easy": [1, 1]})], 2)
    b = _run(tmp_path, "b", [_eval({"easy": [1, 0]})], 2)  # iterations 1, 2 not evaluated
    c = variant_contrasts([("a", a), ("b", b)], iterations=2)
    _, table = contrast_table(c)
    assert [row[2:] for row in table if row[1] == "b"] == [["–"] * 4] * 2


def test_the_comparison_shows_the_differences(tmp_path):
    ref = _run(tmp_path, "separate", [_eval({"easy": [0] * 50}), _eval({"easy": [1] * 50})], 1)
    other = _run(tmp_path, "shared", [_eval({"easy": [0] * 50}), _eval({"easy": [0] * 50})], 1)
    comp = build_comparison([ref.path, other.path], "math")
    md = render_markdown(comp)
    assert "## Differences between the variants" in md
    assert "iteration 1, shared minus separate: pass@1 -1.000" in md
    assert "outside the evaluation noise, below" in render_html(comp)
    solo = render_markdown(build_comparison([ref.path], "math"))
    assert "Differences between the variants" not in solo


def test_rzero_compare_prints_the_differences_in_words(tmp_path, capsys):
    ref = _run(tmp_path, "separate", [_eval({"easy": [0] * 50}), _eval({"easy": [1] * 50})], 1)
    other = _run(tmp_path, "shared", [_eval({"easy": [0] * 50}), _eval({"easy": [0] * 50})], 1)
    assert main(["compare", str(ref.path), str(other.path), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Paired differences (pass@1, 95 % intervals):" in out
    assert "- iteration 1, shared minus separate: pass@1 -1.000" in out
    assert (tmp_path / "comparison.md").is_file()


def test_compare_ends_with_one_line_per_variant_then_the_page(tmp_path, capsys):
    # 50 items; after iteration 1 separate has all 50 right, shared none: shared minus
    # separate = 0/50 - 50/50 = -1.000 -> -100.0 points
    ref = _run(tmp_path, "separate", [_eval({"easy": [0] * 50}), _eval({"easy": [1] * 50})], 1)
    other = _run(tmp_path, "shared", [_eval({"easy": [0] * 50}), _eval({"easy": [0] * 50})], 1)
    assert main(["compare", str(ref.path), str(other.path), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-4] == "iteration 1, pass@1 (paired 95 % intervals):"
    assert out[-3].startswith("  separate  the reference; +100.0 points [+100.0, +100.0]")
    assert out[-3].endswith(
        "against iteration 0 (the base model): outside the evaluation noise, above"
    )
    assert out[-2].startswith("  shared    -100.0 points [-100.0, -100.0], McNemar p ")
    assert out[-2].endswith("against separate: outside the evaluation noise, below")
    assert out[-1] == f"comparison: {(tmp_path / 'comparison.html').resolve()}"


def test_variant_lines_say_when_an_evaluation_is_missing(tmp_path):
    a = _run(tmp_path, "a", [_eval({"easy": [1, 0]}), _eval({"easy": [1, 1]})], 1)
    b = _run(tmp_path, "b", [_eval({"easy": [1, 0]})], 1)  # iteration 1 not evaluated
    lines = variant_lines(variant_contrasts([("a", a), ("b", b)], iterations=1))
    assert lines[2] == "  b  not evaluated at this iteration (or a is not)"
    none = variant_lines(variant_contrasts([("b", b)], iterations=1))
    assert none == ["no variant has an evaluated trained iteration yet"]


def test_the_comparison_figure_has_wilson_bars_for_one_benchmark_only():
    assert _wilson_bar({"easy/pass@1": 0.25, "easy/n": 320}) == pytest.approx(
        wilson_interval(80, 320)
    )
    assert _wilson_bar({"a/pass@1": 0.5, "a/n": 10, "b/pass@1": 0.5, "b/n": 10}) is None
    assert _wilson_bar(None) is None


def test_the_label_panel_shows_the_audit_else_the_exact_labels_where_known():
    def rows(**cell):
        return [{"iteration": 0, "variants": {"a": {}}}, {"iteration": 1, "variants": {"a": cell}}]

    audit = {"accuracy": 0.5, "ci_low": 0.3, "ci_high": 0.7, "n_judged": 24}
    exact = {"known_label_accuracy": 0.225, "known_labels": 187}
    assert label_points(rows(label_accuracy=audit, **exact), "a") == (
        [(1, 0.5, 0.3, 0.7, 24)],
        "audit",
    )
    assert label_points(rows(label_accuracy=None, **exact), "a") == (
        [(1, 0.225, *wilson_interval(42, 187), 187)],
        "exact",
    )
    assert label_points(rows(known_label_accuracy=None, known_labels=0), "a") == ([], "exact")


def test_a_grid_with_the_reference_at_several_seeds_pairs_each_arm_with_its_own_seed(tmp_path):
    from rzero.reports.contrasts import references

    names = ["anchors-0", "rfew-0", "anchors-1", "rfew-1", "rfew-2", "pool-truth-0"]
    assert references(names, [0, 0, 1, 1, 2, 0]) == {
        "anchors-0": "anchors-0",
        "rfew-0": "anchors-0",
        "anchors-1": "anchors-1",  # a replicate is its own reference
        "rfew-1": "anchors-1",
        "rfew-2": "anchors-0",  # no anchors-2 in the grid: the first
        "pool-truth-0": "anchors-0",
    }
    assert set(references(names).values()) == {"anchors-0"}  # no seeds: the first for all
    # the rows: rfew-1 against anchors-1, whose scores differ from anchors-0's
    base = _eval({"easy": [0] * 10})
    runs = [
        ("anchors-0", _run(tmp_path, "anchors-0", [base, _eval({"easy": [1] * 10})], 1)),
        ("anchors-1", _run(tmp_path, "anchors-1", [base, _eval({"easy": [0] * 10})], 1)),
        ("rfew-1", _run(tmp_path, "rfew-1", [base, _eval({"easy": [1] * 5 + [0] * 5})], 1)),
    ]
    c = variant_contrasts(runs, iterations=1, seeds=[0, 1, 1])
    row = next(r for r in c["rows"] if r["variant"] == "rfew-1")
    assert row["reference"] == "anchors-1"
    assert row["vs_reference"]["average"]["delta"] == pytest.approx(0.5)  # not -0.5
    assert any("rfew-1 minus anchors-1" in t for t in c["sentences"])
    header, rows = contrast_table(c)
    assert header[2].startswith("vs anchors at its seed")
    assert [r[2] for r in rows if r[1] == "anchors-1"] == ["(the reference)"]
    assert any("against anchors-1" in line for line in variant_lines(c))
