"""Scoring and evaluate: pass@1 / mean@k / maj@k arithmetic, the equivalence direction, the
results files, `rzero eval` (flags and --config), and the plumbing through a real (tiny)
model."""

from __future__ import annotations

import json

import pytest
from conftest import ScriptedGenerator, tiny_llama

from rzero import evaluation as ev
from rzero.cli import build_parser
from rzero.generation.backends import HFGenerator
from rzero.stats import wilson_interval

# ---------------------------------------------------------------- scoring


@pytest.mark.parametrize(
    "completion, answer, expected",
    [
        ("so the total is \\boxed{12}.", "12", True),
        ("the answer is \\boxed{0.75}", "\\frac{3}{4}", True),  # equivalent, not equal strings
        ("\\boxed{13}", "12", False),
        ("the answer is 12", "12", False),  # no box, no credit
        ("first \\boxed{12}, no wait: \\boxed{13}", "12", False),  # the last box counts
        ("first \\boxed{13}, no wait: \\boxed{12}", "12", True),
        ("\\boxed{}", "12", False),
    ],
)
def test_score_completion(completion, answer, expected):
    assert ev.score_completion(completion, answer) is expected


def test_score_completion_direction():
    # verify(gold="1 < x < 2", target="(1,2)") holds, the reverse does not: "both" needs
    # the two, "either" one of them
    assert ev.score_completion("\\boxed{1 < x < 2}", "(1,2)", direction="both") is False
    assert ev.score_completion("\\boxed{1 < x < 2}", "(1,2)", direction="either") is True


# ---------------------------------------------------------------- evaluate


ITEMS = [
    {"id": "a", "problem": "What is 2+2?", "answer": "4"},
    {"id": "b", "problem": "What is 3/4 as a fraction?", "answer": "\\frac{3}{4}"},
    {"id": "c", "problem": "What is 10-3?", "answer": "7"},
]


def test_evaluate_greedy_pass_at_1():
    gen = ScriptedGenerator(
        {
            "What is 2+2?": ["\\boxed{4}"],
            "What is 3/4 as a fraction?": ["it is \\boxed{0.75}"],
            "What is 10-3?": ["I think 7"],
        }
    )  # right value, but no box
    results = ev.evaluate(gen, {"toy": ITEMS}, batch=2)
    # 2 of 3 boxed answers right -> pass@1 = 2/3
    assert results["benchmarks"]["toy"] == {
        "n": 3,
        "pass@1": pytest.approx(2 / 3),
        "pass@1_interval": list(wilson_interval(2, 3)),
    }
    assert results["average"] == pytest.approx(2 / 3)
    assert results["metrics"] == ["pass@1"]
    # batch=2 -> two calls of 2 and 1 prompts, greedy with one sample each
    assert [(len(ps), n) for ps, n, _ in gen.calls] == [(2, 1), (1, 1)]
    assert all(p.temperature == 0.0 for _, _, p in gen.calls)
    assert [r["correct"] for r in results["items"]] == [[True], [True], [False]]
    assert results["items"][2]["predictions"] == [None]


def test_evaluate_mean_and_majority_at_k():
    gen = ScriptedGenerator(
        {
            "What is 2+2?": ["\\boxed{4}", "\\boxed{4}", "\\boxed{5}"],
            "What is 3/4 as a fraction?": ["\\boxed{1}", "\\boxed{1}", "\\boxed{\\frac{3}{4}}"],
            "What is 10-3?": ["\\boxed{7}", "no idea", "\\boxed{7.0}"],
        }
    )
    results = ev.evaluate(gen, {"toy": ITEMS}, num_samples=3, temperature=0.7)
    row = results["benchmarks"]["toy"]
    # per item right samples: a 2/3, b 1/3, c 2/3 -> mean@3 = (2/3 + 1/3 + 2/3) / 3 = 5/9
    assert row["mean@3"] == pytest.approx(5 / 9)
    assert row["pass@1"] == pytest.approx(5 / 9)  # sampled: pass@1 is the mean@k estimate
    # majority: a "4" (2 of 3, right), b "1" (2 of 3, wrong), c "7" (right) -> maj@3 = 2/3
    assert row["maj@3"] == pytest.approx(2 / 3)
    assert [r["majority_correct"] for r in results["items"]] == [True, False, True]
    assert results["metrics"] == ["pass@1", "mean@3", "maj@3"]
    assert all(n == 3 and p.temperature == 0.7 for _, n, p in gen.calls)


def test_evaluate_average_is_over_benchmarks():
    gen = ScriptedGenerator(
        {
            "What is 2+2?": ["\\boxed{4}"],
            "What is 3/4 as a fraction?": ["\\boxed{2}"],
            "What is 10-3?": ["\\boxed{2}"],
        }
    )
    results = ev.evaluate(gen, {"one": ITEMS[:1], "three": ITEMS})
    # one: 1/1, three: 1/3 -> average = (1 + 1/3) / 2 = 2/3 (not pooled 2/4)
    assert results["average"] == pytest.approx(2 / 3)


def test_evaluate_by_name_with_limit_and_write_results(tmp_path):
    synthetic = ev.synthetic_benchmark()[:4]
    gen = ScriptedGenerator({i["problem"]: [f"\\boxed{{{i['answer']}}}"] for i in synthetic})
    results = ev.evaluate(gen, ["synthetic"], limit=4)
    assert results["benchmarks"]["synthetic"] == {
        "n": 4,
        "pass@1": 1.0,
        "pass@1_interval": list(wilson_interval(4, 4)),
    }
    json_path, md_path = ev.write_results(results, tmp_path / "out")
    saved = json.loads(json_path.read_text())
    assert saved["benchmarks"] == results["benchmarks"]
    assert saved["items"][0]["completions"] == [f"\\boxed{{{synthetic[0]['answer']}}}"]
    md = md_path.read_text()
    assert "| synthetic | 4 | 100.0 |" in md
    assert "| **average** | | 100.0 |" in md
    assert not list((tmp_path / "out").glob(".*"))  # no temp files left behind


def test_evaluate_passes_the_direction_to_every_check():
    items = [{"id": "i", "problem": "Solve 1 < x < 2 as an interval.", "answer": "(1,2)"}]
    gen = ScriptedGenerator({items[0]["problem"]: ["\\boxed{1 < x < 2}"] * 2})
    # k = 2: two sample checks and one majority check, each one-way equivalent only
    both = ev.evaluate(gen, {"toy": items}, num_samples=2)
    either = ev.evaluate(gen, {"toy": items}, num_samples=2, direction="either")
    assert (both["benchmarks"]["toy"]["pass@1"], both["benchmarks"]["toy"]["maj@2"]) == (0, 0)
    assert (either["benchmarks"]["toy"]["pass@1"], either["benchmarks"]["toy"]["maj@2"]) == (1, 1)
    assert either["settings"]["equivalence"] == "either"


def eval_cli(*argv: str) -> int:
    args = build_parser().parse_args(["eval", *argv])
    return args.func(args)


def test_cli_fails_before_loading_a_model(tmp_path, capsys):
    rc = eval_cli(
        "--model",
        "/nonexistent/model",
        "--benchmarks",
        f"synthetic,{tmp_path / 'absent.jsonl'}",
        "--output",
        str(tmp_path),
    )
    assert rc == 2
    assert "no such file" in capsys.readouterr().err


def test_cli_takes_its_benchmarks_from_the_config(tmp_path, capsys):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"eval:\n  benchmarks: [{tmp_path / 'from-config.jsonl'}]\n")
    rc = eval_cli(
        "--config", str(recipe), "--model", "/nonexistent/model", "--output", str(tmp_path)
    )
    assert rc == 2
    assert "from-config.jsonl" in capsys.readouterr().err
    # --set overrides the file, and --benchmarks overrides both
    eval_cli(
        "--config",
        str(recipe),
        "--set",
        f"eval.benchmarks=[{tmp_path / 'set.jsonl'}]",
        "--model",
        "/nonexistent/model",
        "--output",
        str(tmp_path),
    )
    assert "set.jsonl" in capsys.readouterr().err
    eval_cli(
        "--config",
        str(recipe),
        "--benchmarks",
        str(tmp_path / "flag.jsonl"),
        "--model",
        "/nonexistent/model",
        "--output",
        str(tmp_path),
    )
    assert "flag.jsonl" in capsys.readouterr().err


def test_cli_rejects_a_count_below_one(tmp_path, capsys):
    assert eval_cli("--limit", "0", "--output", str(tmp_path)) == 2
    assert "--limit=0: must be at least 1" in capsys.readouterr().err


# ---------------------------------------------------------------- a real model


def test_cli_end_to_end_with_a_tiny_checkpoint(tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "eval"
    rc = eval_cli(
        "--model",
        str(tiny_checkpoint),
        "--benchmarks",
        "synthetic",
        "--limit",
        "2",
        "--max-new-tokens",
        "4",
        "--output",
        str(out),
    )
    assert rc == 0
    saved = json.loads((out / "eval.json").read_text())
    assert saved["model"] == str(tiny_checkpoint)
    assert saved["benchmarks"]["synthetic"]["n"] == 2
    assert "| synthetic | 2 |" in (out / "eval.md").read_text()
    assert "| synthetic | 2 |" in capsys.readouterr().out


def test_cli_end_to_end_from_a_config(tiny_checkpoint, tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"model:\n  name: {tiny_checkpoint}\n"
        "eval:\n  limit: 3\n  max_new_tokens: 4\n"
        "labeling:\n  equivalence: either\n"
        "run:\n  seed: 7\n"
    )
    out = tmp_path / "eval"
    # the config gives model, limit, budget, seed and direction; --limit overrides its limit
    rc = eval_cli(
        "--config",
        str(recipe),
        "--set",
        "eval.max_new_tokens=5",
        "--limit",
        "2",
        "--output",
        str(out),
    )
    assert rc == 0
    saved = json.loads((out / "eval.json").read_text())
    assert saved["model"] == str(tiny_checkpoint)
    assert saved["benchmarks"]["synthetic"]["n"] == 2
    assert saved["settings"]["max_new_tokens"] == 5
    assert saved["settings"]["seed"] == 7
    assert saved["settings"]["equivalence"] == "either"


def test_evaluate_with_a_tiny_llama_end_to_end(tokenizer):
    # tokenizer: the embedded SmolLM2's (conftest), converted locally, no download
    gen = HFGenerator(tiny_llama(tokenizer), tokenizer, batch_size=5)
    results = ev.evaluate(gen, ["synthetic"], limit=5, max_new_tokens=8)
    row = results["benchmarks"]["synthetic"]
    assert row["n"] == 5
    assert 0.0 <= row["pass@1"] <= 1.0  # random weights: whatever it is
    assert all(
        len(r["completions"]) == 1 and isinstance(r["completions"][0], str)
        for r in results["items"]
    )
    assert results["timing"]["new_tokens"] > 0


def test_pass_at_1_intervals_are_wilson_for_greedy_and_t_over_items_for_mean_at_k():
    from scipy import stats

    assert ev.pass_at_1_interval([1.0, 0.0, 1.0], 1) == list(wilson_interval(2, 3))
    means = [1.0, 0.5, 0.0, 0.75, 0.25]
    low, high = stats.t.interval(
        0.95, len(means) - 1, loc=sum(means) / len(means), scale=stats.sem(means)
    )
    assert ev.pass_at_1_interval(means, 4) == pytest.approx([low, high])
    assert ev.pass_at_1_interval([1.0, 1.0, 0.75], 4)[1] == 1.0  # clipped to [0, 1]
    assert ev.pass_at_1_interval([0.5], 4) is None
