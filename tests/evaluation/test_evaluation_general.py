"""General-reasoning evaluation: multiple-choice and BBEH text scoring, their loaders (local
JSONL, the hub faked, the JSONL cache) and mean@k for one benchmark named `name@k`."""

from __future__ import annotations

import json

import pytest
from conftest import ScriptedGenerator

from rzero import evaluation as ev
from rzero.evaluation import loaders
from rzero.evaluation.general import choice_letter, problem_text, text_match
from rzero.stats import wilson_interval

CHOICES = ["42", "a dog", "x + 1"]


@pytest.mark.parametrize(
    "boxed, letter",
    [
        ("B", "B"),
        ("(b)", "B"),
        ("\\text{C}", "C"),
        ("$A$", "A"),  # the letter alone
        ("B. a dog", "B"),
        ("(B) a dog", "B"),
        ("c: x + 1", "C"),  # letter, then the option
        ("a dog", "B"),
        ("42", "A"),
        ("X + 1.", "C"),  # the option's text alone
        ("D", None),  # no option D among three
        ("A dog is it", None),
        ("", None),
        (None, None),  # names no option
    ],
)
def test_choice_letter(boxed, letter):
    assert choice_letter(boxed, CHOICES) == letter


@pytest.mark.parametrize(
    "prediction, reference, expected",
    [
        ("(a)", "a", True),
        ("a", "(A)", True),  # option markers
        ("3.0", "3", True),  # numbers by value
        ("'yes'", "yes", True),
        ("No.", "no", True),  # quotes, case, full stop
        ("[x, y]", "x,y", True),  # brackets and comma spacing
        ("x", "y", False),
        ("", "", False),
        (None, "a", False),
    ],
)
def test_text_match(prediction, reference, expected):
    assert text_match(prediction, reference) is expected


def test_a_choice_item_is_asked_with_lettered_options():
    item = {"problem": "Pick one.", "choices": CHOICES, "answer": "B", "scoring": "choice"}
    text = problem_text(item)
    assert text.startswith("Pick one.\n\nOptions:\n(A) 42\n(B) a dog\n(C) x + 1\n")
    assert "(A to C)" in text and "\\boxed{A}" in text
    assert problem_text({"problem": "1+1?", "answer": "2"}) == "1+1?"  # math: unchanged


def test_local_jsonl_multiple_choice(tmp_path):
    path = tmp_path / "mc.jsonl"
    rows = [
        {"problem": "Which?", "choices": CHOICES, "answer": "C"},
        {"problem": "Which animal?", "choices": CHOICES, "answer": "a dog"},
    ]  # by text
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    name, items = ev.load_benchmark(f"mmlu_pro={path}")
    assert name == "mmlu_pro"
    # the answer is stored as the right option's letter
    assert [(i["answer"], i["scoring"]) for i in items] == [("C", "choice"), ("B", "choice")]


def test_local_jsonl_errors_name_file_and_line(tmp_path):
    path = tmp_path / "mc.jsonl"
    path.write_text(json.dumps({"problem": "Which?", "choices": CHOICES, "answer": "E"}) + "\n")
    with pytest.raises(
        ev.BenchmarkError,
        match=r"mc\.jsonl:1: answer 'E' is neither an "
        r"option letter \(A to C\)",
    ):
        ev.load_benchmark(str(path))
    path.write_text(json.dumps({"problem": "Which?", "answer": "A"}) + "\n")
    with pytest.raises(ev.BenchmarkError, match=r"mc\.jsonl:1: a 'supergpqa' row needs"):
        ev.load_benchmark(f"supergpqa={path}")


def test_local_jsonl_named_bbeh_is_scored_as_text(tmp_path):
    path = tmp_path / "bbeh.jsonl"
    path.write_text(json.dumps({"problem": "True or false?", "answer": "False"}) + "\n")
    name, items = ev.load_benchmark(str(path))  # the file's stem names the benchmark
    assert name == "bbeh" and items[0]["scoring"] == "text"


@pytest.fixture
def empty_caches(tmp_path, monkeypatch):
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setenv("RZERO_CACHE", str(tmp_path / "rzero"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


def test_hub_mmlu_pro_maps_options_and_caches(empty_caches, tmp_path, monkeypatch):
    import datasets

    calls = []

    def fake_load_dataset(repo, config, split):
        calls.append((repo, config, split))
        return datasets.Dataset.from_list(
            [{"question": "2+2?", "options": ["3", "4", "5"], "answer": "B", "category": "math"}]
        )

    monkeypatch.setattr(loaders, "hub_problem", lambda repo: None)
    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    expected = [
        {
            "id": "mmlupro-0",
            "problem": "2+2?",
            "answer": "B",
            "scoring": "choice",
            "choices": ["3", "4", "5"],
        }
    ]
    assert ev.load_benchmark("MMLU-Pro") == ("mmlupro", expected)
    assert calls == [("TIGER-Lab/MMLU-Pro", None, "test")]
    assert (tmp_path / "rzero" / "benchmarks" / "mmlupro.jsonl").is_file()
    assert ev.load_benchmark("mmlu_pro") == ("mmlupro", expected)  # from the JSONL cache
    assert len(calls) == 1


def test_hub_offline_general_benchmark_fails_fast(empty_caches, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(ev.BenchmarkUnavailable, match="benchmark 'supergpqa': m-a-p/SuperGPQA"):
        ev.load_benchmark("SuperGPQA")


def test_at_k_names_the_benchmark_and_its_samples(tmp_path):
    path = tmp_path / "aime.jsonl"
    path.write_text(json.dumps({"problem": "p", "answer": "7"}) + "\n")
    assert ev.split_samples("aime24@32") == ("aime24", 32)
    assert ev.split_samples("mmlupro") == ("mmlupro", None)
    assert ev.load_benchmark(f"aime={path}@4")[0] == "aime@4"
    with pytest.raises(ev.BenchmarkError, match="must be >= 1"):
        ev.load_benchmark(f"aime={path}@0")


MC = [
    {
        "id": "m1",
        "problem": "Which is four?",
        "choices": ["3", "4"],
        "answer": "B",
        "scoring": "choice",
    },
    {
        "id": "m2",
        "problem": "Which is three?",
        "choices": ["3", "4"],
        "answer": "A",
        "scoring": "choice",
    },
]
MATH = [{"id": "a1", "problem": "What is 3+4?", "answer": "7"}]


def test_evaluate_scores_choices_and_samples_one_benchmark_k_times():
    gen = ScriptedGenerator(
        match="prefix",
        script={
            "Which is four?": ["so \\boxed{(B)}"],
            "Which is three?": ["\\boxed{4}"],  # names option B by its text: wrong
            "What is 3+4?": ["\\boxed{7}", "\\boxed{7}", "\\boxed{8}", "\\boxed{7}"],
        },
    )
    results = ev.evaluate(gen, {"mmlupro": MC, "aime@4": MATH}, temperature=0.6)
    # mmlupro greedy: 1 of 2 right; aime@4: 3 of 4 samples right -> mean@4 = 0.75, maj@4 = 1
    assert results["benchmarks"]["mmlupro"] == {
        "n": 2,
        "pass@1": 0.5,
        "pass@1_interval": list(wilson_interval(1, 2)),
    }
    row = results["benchmarks"]["aime@4"]
    assert (row["pass@1"], row["mean@4"], row["maj@4"]) == (0.75, 0.75, 1.0)
    assert results["average"] == pytest.approx((0.5 + 0.75) / 2)
    assert results["metrics"] == ["pass@1", "mean@4", "maj@4"]
    # one greedy call for the two questions, one call of 4 samples at the temperature
    assert [(n, p.temperature) for _, n, p in gen.calls] == [(1, 0.0), (4, 0.6)]
    assert results["settings"]["samples"] == {"mmlupro": 1, "aime@4": 4}
    md = ev.results_markdown(results)
    # pass@1's interval: Wilson for the greedy benchmark; none for one item sampled 4 times
    assert "| mmlupro | 2 | 50.0 | [9.5, 90.5] | – | – |" in md
    assert "| aime@4 | 1 | 75.0 | – | 75.0 | 100.0 |" in md


def test_majority_of_choice_samples_is_by_option():
    # "B", "(b)" and the text "4" all name option B: the majority is B, which is right
    gen = ScriptedGenerator(
        match="prefix",
        script={
            "Which is four?": ["\\boxed{B}", "\\boxed{(b)}", "\\boxed{4}"],
            "Which is three?": ["\\boxed{B}", "\\boxed{A}", "no box"],
        },
    )
    results = ev.evaluate(gen, {"mc": MC}, num_samples=3)
    row = results["benchmarks"]["mc"]
    # m1: 3/3 right, m2: 1/3 right -> mean@3 = (1 + 1/3) / 2 = 2/3; majority m1 B (right),
    # m2 a tie of B and A, the first seen wins: B (wrong) -> maj@3 = 1/2
    assert row["mean@3"] == pytest.approx(2 / 3)
    assert row["maj@3"] == 0.5
