"""Collapse watch: question diversity, answer types and fragmentation, warnings and stops."""

import dataclasses

import pytest

from rzero.challenger.repetition import bleu_distance_matrix
from rzero.config import ConfigError, RunConfig, WatchConfig, load_config
from rzero.selfplay.collapse import (
    WARNINGS,
    answer_fragmentation,
    answer_type,
    answer_types,
    collapse_warnings,
    distinct_n,
    question_diversity,
    question_structure,
    should_stop,
    stopping,
    structure_count,
    warning_name,
)

# --- wording -----------------------------------------------------------------------------


def test_distinct_2_counts_repeated_bigrams_once():
    # "a b a b": bigrams (a b), (b a), (a b) -> 2 distinct of 3
    assert distinct_n(["a b a b"], 2) == pytest.approx(2 / 3)


def test_distinct_1_over_a_batch():
    # tokens a, b, a, c -> 3 distinct of 4 (the batch is one corpus)
    assert distinct_n(["a b", "A c"], 1) == pytest.approx(3 / 4)


def test_distinct_n_of_nothing_is_zero():
    assert distinct_n([], 2) == 0.0 and distinct_n(["one"], 2) == 0.0


# --- structure ---------------------------------------------------------------------------


def test_structure_masks_every_number():
    assert question_structure("What is 12.5 +  3?") == "what is # + #?"
    assert question_structure("Sell 1,000 apples") == "sell # apples"


def test_a_template_with_new_numbers_counts_once():
    questions = [
        "A train covers 60 km in 2 hours. Speed?",
        "A train covers 90 km in 3 hours. Speed?",
        "How many primes are below 20?",
    ]
    assert structure_count(questions) == 2


# --- one batch ---------------------------------------------------------------------------

Q = [
    "What is the sum of the first ten positive integers?",
    "What is the sum of the first ten positive integers?",
    "Find all real x with x^2 = 2.",
    "How many ways can 5 people sit in a row?",
]


def test_diversity_counts_bleu_clusters_per_question():
    # the duplicate pair is one cluster: 3 clusters / 4 questions
    d = question_diversity(Q)
    assert (d["questions"], d["clusters"], d["cluster_ratio"]) == (4, 3, 0.75)


def test_mean_bleu_distance_is_the_mean_over_pairs():
    # naive reference: average d_ij over the 12 ordered pairs i != j
    m = bleu_distance_matrix(Q)
    pairs = [m[i][j] for i in range(4) for j in range(4) if i != j]
    assert question_diversity(Q)["mean_bleu_distance"] == pytest.approx(sum(pairs) / 12)


def test_structure_ratio_in_the_batch():
    # the duplicate shares its structure: 3 structures / 4
    assert question_diversity(Q)["structure_ratio"] == 0.75


def test_large_batches_are_sampled_for_bleu():
    questions = [f"Question number {i} about topic {i * 7}?" for i in range(10)]
    d = question_diversity(questions, sample=4)
    assert (d["questions"], d["bleu_sample"]) == (10, 4)
    # the structure count still uses all ten: one template
    assert d["structures"] == 1


def test_no_questions_give_zero_ratios():
    d = question_diversity([])
    assert (d["cluster_ratio"], d["structure_ratio"], d["distinct_2"]) == (0.0, 0.0, 0.0)


# --- answers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer, kind",
    [
        ("42", "integer"),
        ("-7", "integer"),
        ("1,000", "integer"),
        ("$12$", "integer"),
        ("50\\%", "integer"),
        ("0.25", "decimal"),
        ("-.5", "decimal"),
        ("3/4", "fraction"),
        ("\\frac{3}{4}", "fraction"),
        ("-\\dfrac{1}{2}", "fraction"),
        ("\\frac34", "fraction"),
        ("2\\sqrt{3}", "expression"),
        ("x+1", "expression"),
        ("(1, 2)", "expression"),
        ("x", "expression"),
        ("12 cm", "expression"),
        ("yes", "text"),
        ("\\text{Tuesday}", "text"),
        ("No solution", "text"),
        (None, "none"),
        ("  ", "none"),
    ],
)
def test_answer_type(answer, kind):
    assert answer_type(answer) == kind


def test_answer_types_share_of_the_top_type():
    # 3 integers, 1 fraction, 1 unparsed: top type integer, 3 of the 4 typed answers
    t = answer_types(["1", "2", "3", "1/2", None])
    assert (t["top_type"], t["top_share"], t["types"]) == ("integer", 0.75, 2)
    assert t["counts"]["none"] == 1


# --- fragmentation -----------------------------------------------------------------------


def test_fragmentation_of_a_split_and_a_scattered_vote():
    # a 5-5 split: 2 groups of 10 votes (0.2 per vote); ten different answers: 10 (1.0 per vote)
    rows = [
        {"num_groups": 2, "answers": ["1"] * 5 + ["2"] * 5, "top2_margin": 0.0, "parse_rate": 1.0},
        {
            "num_groups": 10,
            "answers": [str(i) for i in range(10)],
            "top2_margin": 0.0,
            "parse_rate": 1.0,
        },
        {"num_groups": 0, "answers": [], "top2_margin": None, "parse_rate": None},
    ]
    f = answer_fragmentation(rows)
    assert f["rows"] == 2  # the row that was never voted on is left out
    assert f["mean_num_groups"] == 6.0  # (2 + 10) / 2
    assert f["groups_per_vote"] == pytest.approx(0.6)  # (0.2 + 1.0) / 2
    assert (f["mean_top2_margin"], f["mean_parse_rate"]) == (0.0, 1.0)


# --- warnings ----------------------------------------------------------------------------

HEALTHY = {
    "questions": 64,
    "cluster_ratio": 0.9,
    "structure_ratio": 0.8,
    "distinct_2": 0.5,
    "valid_rate": 0.9,
    "mean_parse_rate": 0.95,
    "groups_per_vote": 0.3,
    "kept_fraction": 0.4,
    "label_accuracy": 0.7,
    "co_error_phi": 0.1,
    "increment": 0.02,
    "increment_ci_low": -0.01,
    "increment_ci_high": 0.05,
}


def test_healthy_numbers_raise_no_warning():
    assert collapse_warnings(HEALTHY, WatchConfig()) == []


@pytest.mark.parametrize(
    "key, value, name",
    [
        ("cluster_ratio", 0.3, "diversity"),
        ("structure_ratio", 0.2, "structure"),
        ("valid_rate", 0.1, "well_formed"),
        ("mean_parse_rate", 0.2, "parse"),
        ("groups_per_vote", 0.8, "fragmentation"),
        ("kept_fraction", 0.0, "band"),
        ("label_accuracy", 0.42, "label_accuracy"),
        ("co_error_phi", 0.76, "co_error"),
        ("top_label_share", 0.9, "label_mode"),
    ],
)
def test_each_threshold_names_its_warning(key, value, name):
    warnings = collapse_warnings({**HEALTHY, key: value}, WatchConfig())
    assert [warning_name(w) for w in warnings] == [name]


def test_warning_reads_as_a_sentence():
    [w] = collapse_warnings({"cluster_ratio": 0.3}, WatchConfig(), where="iteration 2 pool")
    assert w == (
        "diversity: iteration 2 pool: BLEU clusters per question 0.30 is below "
        "watch.min_cluster_ratio = 0.5; many questions are rewordings of each other"
    )


def test_a_threshold_of_none_is_off():
    assert collapse_warnings({"cluster_ratio": 0.1}, WatchConfig(min_cluster_ratio=None)) == []


def test_distinct_2_is_off_by_default_and_on_when_set():
    assert collapse_warnings({"distinct_2": 0.05}, WatchConfig()) == []
    [w] = collapse_warnings({"distinct_2": 0.05}, WatchConfig(min_distinct_2=0.1))
    assert warning_name(w) == "wording"


def test_diversity_of_fewer_than_two_questions_is_not_judged():
    assert collapse_warnings({"questions": 1, "cluster_ratio": 0.0}, WatchConfig()) == []


def test_increment_warns_only_when_the_interval_is_below_zero():
    noisy = {"increment": -0.02, "increment_ci_low": -0.05, "increment_ci_high": 0.01}
    assert collapse_warnings(noisy, WatchConfig()) == []
    [w] = collapse_warnings({**noisy, "increment_ci_high": -0.001}, WatchConfig())
    assert w.startswith("increment: average pass@1 fell -0.020 [-0.050, -0.001]")


def test_label_accuracy_warning_shows_its_interval():
    [w] = collapse_warnings(
        {"label_accuracy": 0.42, "label_accuracy_ci_low": 0.33, "label_accuracy_ci_high": 0.52},
        WatchConfig(),
    )
    assert "0.42 [0.33, 0.52]" in w


# --- stopping ----------------------------------------------------------------------------


def test_should_stop_on_a_listed_warning():
    warnings = collapse_warnings({"cluster_ratio": 0.3, "valid_rate": 0.1}, WatchConfig())
    assert should_stop(warnings, RunConfig(stop_on=["well_formed"]))
    assert stopping(warnings, ["well_formed"]) == [warnings[1]]


def test_no_stop_by_default():
    warnings = collapse_warnings({"cluster_ratio": 0.3}, WatchConfig())
    assert not should_stop(warnings, RunConfig())


def test_config_stop_on_lists_exactly_the_warning_names():
    [f] = [f for f in dataclasses.fields(RunConfig) if f.name == "stop_on"]
    assert tuple(f.metadata["choices"]) == WARNINGS


def test_config_rejects_an_unknown_stop_name():
    with pytest.raises(ConfigError, match="run.stop_on='colapse': allowed values are"):
        load_config(None, ["run.stop_on=[colapse]"])


def test_config_reads_watch_thresholds():
    cfg = load_config(None, ["watch.min_cluster_ratio=0.25", "run.stop_on=[diversity, band]"])
    assert cfg.watch.min_cluster_ratio == 0.25 and cfg.run.stop_on == ["diversity", "band"]


# --- the run report ----------------------------------------------------------------------


def test_report_renders_the_collapse_watch(tmp_path):
    from rzero.config import RZeroConfig
    from rzero.io import write_json_atomic
    from rzero.math.report import collapse_watch
    from rzero.rundir import RunDir

    run = RunDir(tmp_path)
    step = {
        "step": 1,
        "questions": 12,
        "valid_rate": 0.75,
        "cluster_ratio": 0.5,
        "distinct_2": 0.41,
        "structure_ratio": 0.25,
    }
    write_json_atomic(
        run.marker_path(1, "challenger"),
        {
            "seconds": 1.0,
            "steps": [step],
            "warnings": [
                "structure: iteration 1, challenger step 1: structures per question "
                "0.25 is below watch.min_structure_ratio = 0.5; ..."
            ],
        },
    )
    write_json_atomic(
        run.marker_path(1, "labelling"),
        {
            "seconds": 1.0,
            "metrics": {
                "mean_num_groups": 3.0,
                "groups_per_vote": 0.3,
                "mean_top2_margin": 0.2,
                "mean_parse_rate": 0.9,
                "kept_questions": 25,
                "top_label": "7",
                "top_label_count": 17,
                "top_label_share": 0.68,
            },
        },
    )
    text = "\n".join(collapse_watch(run, RZeroConfig()))
    assert "## Collapse watch" in text
    assert "| 1 | step 1 | 12 | 0.75 | 0.50 | 0.41 | 0.25 |" in text
    assert (
        "- iteration 1 labelling: 3.00 answer groups per question (0.30 per vote), "
        "top-2 margin 0.20, parse rate 0.90; of the 25 questions kept for training, 17 "
        "carry the label 7"
    ) in text
    assert "- structure: iteration 1, challenger step 1:" in text
    assert "dropped" not in text  # no label cap, no mention of it
    write_json_atomic(
        run.marker_path(2, "labelling"),
        {
            "seconds": 1.0,
            "metrics": {
                "mean_num_groups": 3.0,
                "groups_per_vote": 0.3,
                "mean_top2_margin": 0.2,
                "mean_parse_rate": 0.9,
                "kept_questions": 12,
                "top_label": "1",
                "top_label_count": 5,
                "top_label_share": 5 / 12,
                "capped_questions": 10,
            },
        },
    )
    text = "\n".join(collapse_watch(run, RZeroConfig()))
    assert (
        "of the 12 questions kept for training, 5 carry the label 1; the label cap "
        "(labeling.cap_label_share) dropped 10 more"
    ) in text


def test_report_has_no_watch_section_without_numbers(tmp_path):
    from rzero.config import RZeroConfig
    from rzero.math.report import collapse_watch
    from rzero.rundir import RunDir

    assert collapse_watch(RunDir(tmp_path), RZeroConfig()) == []


# --- label concentration -----------------------------------------------------------------


def test_label_concentration_counts_the_kept_questions_only():
    from rzero.selfplay.collapse import label_concentration

    rows = (
        [{"label": "7", "kept": True}] * 4
        + [{"label": " 7 ", "kept": True}]
        + [{"label": "12", "kept": True}, {"label": None, "kept": True}]
        + [{"label": "3", "kept": False}] * 9
    )
    c = label_concentration(rows)
    assert (c["top_label"], c["top_label_count"], c["kept_questions"]) == ("7", 5, 6)
    assert c["top_label_share"] == pytest.approx(5 / 6)
    # without a kept key every row counts (the filter off); under 5 questions no share
    assert label_concentration([{"label": "1"}] * 4)["top_label_share"] is None
    assert label_concentration([{"label": "1"}] * 5)["top_label_share"] == 1.0
    assert label_concentration([])["kept_questions"] == 0


def test_label_mode_warning_names_the_label_and_counts():
    m = {"top_label_share": 0.68, "top_label": "7", "top_label_count": 17, "kept_questions": 25}
    [w] = collapse_warnings(m, WatchConfig(), where="iteration 2 labelling")
    assert w.startswith(
        "label_mode: iteration 2 labelling: 17 of 25 questions the solver "
        "trains on carry the label 7 (0.68), above watch.max_label_share = 0.5"
    )
    assert collapse_warnings({**m, "top_label_share": 0.4}, WatchConfig()) == []
    assert collapse_warnings(m, WatchConfig(max_label_share=None)) == []
    assert collapse_warnings({**m, "top_label_share": None}, WatchConfig()) == []


def test_labelling_marker_gets_the_label_concentration(tmp_path):
    from rzero.io import write_jsonl_atomic
    from rzero.rundir import RunDir
    from rzero.selfplay import watch

    run = RunDir(tmp_path)
    rows = [
        {
            "question": f"q{i}",
            "answers": ["7"] * 4 + ["1"] * 4,
            "label": "7" if i < 4 else str(i),
            "p_hat": 0.5,
            "num_groups": 2,
            "top2_margin": 0.0,
            "parse_rate": 1.0,
            "kept": True,
        }
        for i in range(6)
    ]
    write_jsonl_atomic(run.iter_dir(1) / "labelled.jsonl", rows)
    info = watch.after_phase(
        load_config(None),
        run,
        1,
        "labelling",
        {"metrics": {"kept_fraction": 1.0, "mean_parse_rate": 1.0}},
        math=True,
    )
    assert info["metrics"]["top_label"] == "7"
    assert info["metrics"]["top_label_share"] == pytest.approx(4 / 6)
    assert [w.split(":")[0] for w in info["warnings"]] == ["label_mode"]


def test_the_html_page_shows_the_collapse_watch_escaped(tmp_path):
    from rzero.config import RZeroConfig
    from rzero.io import write_json_atomic
    from rzero.math.page import render_html
    from rzero.rundir import RunDir

    run = RunDir(tmp_path)
    write_json_atomic(
        run.marker_path(2, "labelling"),
        {
            "seconds": 1.0,
            "metrics": {
                "mean_num_groups": 3.0,
                "groups_per_vote": 0.3,
                "mean_top2_margin": 0.2,
                "mean_parse_rate": 0.9,
                "kept_questions": 6,
                "top_label": "<b>7</b>",
                "top_label_count": 4,
                "top_label_share": 0.67,
                "kept_fraction": 0.5,
            },
            "warnings": [
                "label_mode: iteration 2 labelling: 4 of 6 questions the solver trains on "
                "carry the label <b>7</b> (0.67), above watch.max_label_share = 0.5"
            ],
        },
    )
    page = render_html(run, RZeroConfig(), (["iter"], []))
    assert "<h2>Collapse watch</h2>" in page
    assert "4 carry the label &lt;b&gt;7&lt;/b&gt;" in page
    assert "label_mode: iteration 2 labelling: 4 of 6" in page
    assert "<b>7</b>" not in page
