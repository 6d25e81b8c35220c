"""The cross-iteration matrix: solver i's majority answers on pool j against its labels."""

import json

import pytest

from rzero.selfplay.crossplay import cross_iteration_matrix, cross_matrix_markdown, matrix_png


def same(pairs):
    """String equality instead of math-verify (no worker process in these tests)."""
    return [a is not None and a == b for a, b in pairs]


LABELS = {1: ["1", "2", "3", "4"], 2: ["5", "6", None, "8"]}
TRUTH = {1: ["1", "2", "3", "0"]}
ANSWERS = {
    (0, 1): ["1", "2", "3", "4"],  # the labeller of pool 1: agrees 4/4, right 3/4
    (1, 1): ["1", "2", "x", "4"],  # agrees 3/4
    (1, 2): ["5", "6", "7", None],  # pool 2: question 3 has no label -> 2 of 3 agree
}


def test_agreement_per_cell():
    m = cross_iteration_matrix(ANSWERS, LABELS, equivalent=same)
    assert (m["solvers"], m["pools"]) == ([0, 1], [1, 2])
    assert m["agreement"][0][0]["rate"] == 1.0
    assert m["agreement"][1][0]["rate"] == 0.75
    assert (m["agreement"][1][1]["k"], m["agreement"][1][1]["n"]) == (2, 3)
    assert m["agreement"][0][1] is None  # solver 0 was not asked about pool 2


def test_accuracy_where_truth_is_known():
    m = cross_iteration_matrix(ANSWERS, LABELS, TRUTH, equivalent=same)
    assert m["accuracy"][0][0]["rate"] == 0.75  # "4" against the true "0"
    assert m["accuracy"][1][1]["n"] == 0  # no truth for pool 2


def test_cells_carry_wilson_intervals():
    m = cross_iteration_matrix(ANSWERS, LABELS, equivalent=same)
    cell = m["agreement"][1][0]  # 3 of 4
    assert (cell["ci_low"], cell["ci_high"]) == pytest.approx((0.3006, 0.9544), abs=1e-3)


def test_no_truth_means_no_accuracy():
    assert cross_iteration_matrix(ANSWERS, LABELS, equivalent=same)["accuracy"] is None


def test_forgetting_is_flagged_when_intervals_part():
    labels = {1: [str(i) for i in range(40)]}
    answers = {
        (0, 1): [str(i) for i in range(40)],  # 40/40 right
        (2, 1): [str(i) if i < 10 else "?" for i in range(40)],
    }  # 10/40
    m = cross_iteration_matrix(answers, labels, {1: labels[1]}, equivalent=same)
    assert m["flags"] == [m["flags"][0]] and m["flags"][0].startswith(
        "pool 1: solver 2 answers 25.0%"
    )


def test_output_is_json():
    m = cross_iteration_matrix(ANSWERS, LABELS, TRUTH, equivalent=same)
    assert json.loads(json.dumps(m)) == m


def test_markdown_table():
    text = cross_matrix_markdown(cross_iteration_matrix(ANSWERS, LABELS, equivalent=same))
    assert "| solver 1 | 0.75 [0.30, 0.95] (4) | 0.67 [0.21, 0.94] (3) |" in text
    assert "| solver 0 | 1.00 [0.51, 1.00] (4) | – |" in text


def test_heatmap_is_a_png():
    png = matrix_png(cross_iteration_matrix(ANSWERS, LABELS, equivalent=same))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_answers_must_match_the_pool():
    with pytest.raises(ValueError, match="4 questions"):
        cross_iteration_matrix({(0, 1): ["1"]}, LABELS, equivalent=same)
