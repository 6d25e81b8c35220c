"""Benchmarks and scoring: synthetic labels recomputed independently, loaders, pass@1 /
mean@k / maj@k arithmetic, and the plumbing through a real (tiny) model."""

from __future__ import annotations

import ast
import json
import operator
import re
import socket
import time
from collections import Counter
from fractions import Fraction

import pytest
from conftest import tiny_llama

from rzero import evaluation as ev
from rzero.generation import GenerationStats, HFGenerator, SamplingParams
from rzero.labeling.equivalence import equivalent_many

# ---------------------------------------------------------------- independent reference
#
# The synthetic generator computes answers with sympy; here they are recomputed from each
# item's structured `data` with plain fractions.Fraction, on a separate code path.

_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
_AST_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
            ast.Div: operator.truediv}


def _eval_fraction(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Expression):
        return _eval_fraction(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval_fraction(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _AST_OPS:
        return _AST_OPS[type(node.op)](_eval_fraction(node.left), _eval_fraction(node.right))
    raise ValueError(f"unexpected node {ast.dump(node)}")


def reference_answer(item: dict) -> Fraction:
    data, kind = item["data"], item["kind"]
    if kind == "arithmetic":
        return _eval_fraction(ast.parse(data["expression"], mode="eval"))
    if kind == "fractions":
        fracs = [Fraction(n, d) for n, d in data["fractions"]]
        value = fracs[0]
        for op, f in zip(data["ops"], fracs[1:], strict=True):
            value = _OPS[op](value, f)  # left to right, as the problem parenthesises
        return value
    if kind == "percentages":
        if data["form"] == "of":
            return Fraction(data["p"], 100) * data["n"]
        if data["form"] == "what_percent":
            return Fraction(data["a"], data["b"]) * 100
        return data["n"] * (1 + Fraction(data["p"], 100)) * (1 - Fraction(data["q"], 100))
    if kind == "linear":
        if "a1" in data:  # Cramer's rule
            det = data["a1"] * data["b2"] - data["a2"] * data["b1"]
            x = Fraction(data["c1"] * data["b2"] - data["c2"] * data["b1"], det)
            y = Fraction(data["a1"] * data["c2"] - data["a2"] * data["c1"], det)
            return {"x": x, "y": y, "x + y": x + y}[data["ask"]]
        if "d" in data:  # a x + b = c x + d
            return Fraction(data["d"] - data["b"], data["a"] - data["c"])
        return Fraction(data["c"] - data["b"], data["a"])  # a x + b = c
    t = data["template"]
    if t == "bags":
        return Fraction(data["a"] + data["b"] * data["c"])
    if t == "share":
        return Fraction(data["n"], data["k"])
    if t == "speed":
        return Fraction(data["d"], data["t"]) * data["s"]
    if t == "change":
        return Fraction(data["z"] - data["x"] * data["p"] - data["y"] * data["q"])
    if t == "pipes":
        return 1 / (Fraction(1, data["a"]) + Fraction(1, data["b"]))
    if t == "sum_difference":
        return Fraction(data["s"] + data["d"], 2)
    raise ValueError(f"unknown template {t}")


def parse_stored(answer: str) -> Fraction:
    """`12`, `-2`, `118.8`, `\\frac{3}{4}`, `-\\frac{3}{4}` -> Fraction."""
    m = re.fullmatch(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", answer)
    if m:
        value = Fraction(int(m.group(2)), int(m.group(3)))
        return -value if m.group(1) else value
    return Fraction(answer)


# ---------------------------------------------------------------- synthetic benchmark


@pytest.fixture(scope="module")
def synthetic():
    return ev.synthetic_benchmark()


def test_synthetic_answers_match_an_independent_recomputation(synthetic):
    assert len(synthetic) >= 200
    for item in synthetic:
        assert parse_stored(item["answer"]) == reference_answer(item), item


def test_synthetic_fractions_are_in_lowest_terms(synthetic):
    for item in synthetic:
        m = re.fullmatch(r"-?\\frac\{(\d+)\}\{(\d+)\}", item["answer"])
        if m:
            f = Fraction(int(m.group(1)), int(m.group(2)))
            assert (f.numerator, f.denominator) == (int(m.group(1)), int(m.group(2)))
            assert f.denominator > 1


def test_synthetic_composition(synthetic):
    cells = Counter((item["tier"], item["kind"]) for item in synthetic)
    # 5 kinds x 3 tiers, 16 each -> 240 items
    assert set(cells) == {(t, k) for t in ev.SYNTHETIC_TIERS for k in ev.SYNTHETIC_KINDS}
    assert set(cells.values()) == {ev.SYNTHETIC_PER_CELL}
    assert len({item["id"] for item in synthetic}) == len(synthetic)
    assert len({item["problem"] for item in synthetic}) == len(synthetic)
    # interleaved: the first 15 items already cover every (tier, kind) cell
    assert len({(i["tier"], i["kind"]) for i in synthetic[:15]}) == 15


def test_synthetic_problem_text_states_the_stored_data(synthetic):
    for item in synthetic:
        if item["kind"] == "arithmetic":
            latex = re.search(r"\$(.*)\$", item["problem"]).group(1)
            assert latex.replace("\\times", "*").replace("\\div", "/") == \
                item["data"]["expression"]
        elif item["kind"] == "fractions":
            shown = re.findall(r"\\frac\{(\d+)\}\{(\d+)\}", item["problem"])
            assert [[int(n), int(d)] for n, d in shown] == item["data"]["fractions"]


def test_synthetic_is_deterministic_and_seeded(synthetic):
    assert ev.synthetic_benchmark() == synthetic
    other = ev.synthetic_benchmark(seed=1)
    assert len(other) == len(synthetic)
    assert {i["problem"] for i in other} != {i["problem"] for i in synthetic}
    assert ev.load_benchmark("synthetic:1") == ("synthetic:1", other)


def test_synthetic_answers_are_understood_by_the_scorer(synthetic):
    # each stored answer against the same value written as p/q, and against value + 1
    right = [(f"{v.numerator}/{v.denominator}", item["answer"])
             for item in synthetic for v in [parse_stored(item["answer"])]]
    wrong = [(str(parse_stored(item["answer"]) + 1), item["answer"]) for item in synthetic]
    assert equivalent_many(right) == [True] * len(right)
    assert equivalent_many(wrong) == [False] * len(wrong)


def test_render_answer():
    from sympy import Rational

    assert ev.render_answer(Rational(12)) == "12"
    assert ev.render_answer(Rational(-3, 4)) == "-\\frac{3}{4}"
    assert ev.render_answer(Rational(594, 5), "decimal") == "118.8"
    assert ev.render_answer(Rational(-1, 40), "decimal") == "-0.025"
    assert ev.render_answer(Rational(1, 3), "decimal") == "\\frac{1}{3}"  # not terminating


# ---------------------------------------------------------------- scoring


@pytest.mark.parametrize("completion, answer, expected", [
    ("so the total is \\boxed{12}.", "12", True),
    ("the answer is \\boxed{0.75}", "\\frac{3}{4}", True),  # equivalent, not equal strings
    ("\\boxed{13}", "12", False),
    ("the answer is 12", "12", False),  # no box, no credit
    ("first \\boxed{12}, no wait: \\boxed{13}", "12", False),  # the last box counts
    ("first \\boxed{13}, no wait: \\boxed{12}", "12", True),
    ("\\boxed{}", "12", False),
])
def test_score_completion(completion, answer, expected):
    assert ev.score_completion(completion, answer) is expected


# ---------------------------------------------------------------- loaders


def test_jsonl_round_trip(tmp_path):
    rows = [{"problem": "What is $1+1$?", "answer": "2"},
            {"id": "q7", "problem": "Half of 3?", "answer": "\\frac{3}{2}", "level": 2},
            {"problem": "AIME-style", "answer": 204}]  # a numeric answer becomes a string
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    name, items = ev.load_benchmark(str(path))
    assert name == "mine"
    assert [i["problem"] for i in items] == [r["problem"] for r in rows]
    assert [i["answer"] for i in items] == ["2", "\\frac{3}{2}", "204"]
    assert [i["id"] for i in items] == ["mine-0", "q7", "mine-2"]
    assert items[1]["level"] == 2  # extra fields are kept
    name, named = ev.load_benchmark(f"gsm8k-local={path}")  # name=path form
    assert name == "gsm8k-local"
    assert [i["id"] for i in named] == ["gsm8k-local-0", "q7", "gsm8k-local-2"]


def test_bad_jsonl_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"problem": "a", "answer": "1"}\n{"problem": "b", "answer":\n')
    with pytest.raises(ev.BenchmarkError, match=r"bad\.jsonl:2: invalid JSON"):
        ev.load_benchmark(str(path))
    path.write_text('{"problem": "a", "answer": "1"}\n\n{"question": "b", "answer": "2"}\n')
    with pytest.raises(ev.BenchmarkError, match=r"bad\.jsonl:3: missing field\(s\) 'problem'"):
        ev.load_benchmark(str(path))
    with pytest.raises(ev.BenchmarkError, match="no such file"):
        ev.load_benchmark(str(tmp_path / "absent.jsonl"))


def test_unknown_benchmark_name():
    with pytest.raises(ev.BenchmarkError, match="unknown benchmark 'mathh500'"):
        ev.load_benchmark("mathh500")


def test_hub_names_and_aliases():
    assert ev.hub_name("MATH-500") == "math500"
    assert ev.hub_name("aime_2025") == "aime25"
    assert ev.hub_name("OlympiadBench") == "olympiadbench"
    assert ev.hub_name("mathh500") is None
    assert set(ev.HUB_BENCHMARKS) == {"math500", "gsm8k", "amc23", "minerva",
                                      "olympiadbench", "aime24", "aime25"}


def test_gsm8k_answer_is_the_text_after_hashes():
    source = ev.HUB_BENCHMARKS["gsm8k"]
    assert ev._hub_answer("She pays 3 * 400 = 1200.\n#### 1,200", source) == "1200"
    assert ev._hub_answer(["$\\frac{1}{2}$", "3"], ev.HUB_BENCHMARKS["olympiadbench"]) == \
        "$\\frac{1}{2}$, 3"


@pytest.fixture
def empty_caches(tmp_path, monkeypatch):
    """No rzero JSONL cache and an empty `datasets` cache, whatever this machine holds."""
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setenv("RZERO_CACHE", str(tmp_path / "rzero"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


@pytest.fixture
def silent_server():
    """A local TCP port that accepts connections and never answers: a hanging hub."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()


def _assert_unavailable_fast(name: str) -> str:
    t0 = time.perf_counter()
    with pytest.raises(ev.BenchmarkUnavailable) as info:
        ev.load_benchmark(name)
    elapsed = time.perf_counter() - t0
    message = str(info.value)
    assert "\n" not in message
    assert f"benchmark {ev.hub_name(name)!r}" in message
    assert "unreachable" in message
    assert "`problem` and `answer`" in message
    assert elapsed < 15, f"took {elapsed:.1f} s"
    return message


def test_hub_loader_connection_refused_fails_fast(empty_caches, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    assert "Connection refused" in _assert_unavailable_fast("math500")


def test_hub_loader_hanging_hub_fails_fast(empty_caches, silent_server, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", silent_server)
    t0 = time.perf_counter()
    _assert_unavailable_fast("gsm8k")
    # the probe gives up after HUB_TIMEOUT_S = 3 s instead of waiting on the socket
    assert time.perf_counter() - t0 >= ev.HUB_TIMEOUT_S - 0.1


def test_hub_loader_real_endpoint(empty_caches):
    if ev.hub_problem(ev.HUB_BENCHMARKS["aime24"].repo) is None:
        # a machine with network: the real download works
        assert len(ev.load_benchmark("aime24")[1]) == 30
    else:  # this sandbox: no route to huggingface.co
        _assert_unavailable_fast("aime24")


def test_hub_loader_maps_fields_and_caches(empty_caches, tmp_path, monkeypatch):
    # the online branch, with the hub replaced by an in-memory dataset
    import datasets

    calls = []

    def fake_load_dataset(repo, config, split):
        calls.append((repo, config, split))
        return datasets.Dataset.from_list([{"question": "Q?", "answer": "3 * 400\n#### 1,200"}])

    monkeypatch.setattr(ev, "hub_problem", lambda repo: None)
    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    assert ev.load_benchmark("GSM8K") == ("gsm8k", [{"id": "gsm8k-0", "problem": "Q?",
                                                     "answer": "1200"}])
    assert calls == [("openai/gsm8k", "main", "test")]
    assert (tmp_path / "rzero" / "benchmarks" / "gsm8k.jsonl").is_file()
    ev.load_benchmark("gsm8k")  # the second load reads the JSONL cache, not the hub
    assert len(calls) == 1
    with pytest.raises(ev.BenchmarkError, match="has no field.*problem"):
        ev.load_benchmark("math500")  # the fake rows have `question`, MATH-500 `problem`


def test_hub_loader_prefers_the_jsonl_cache(empty_caches, tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    cached = tmp_path / "rzero" / "benchmarks" / "aime25.jsonl"
    cached.parent.mkdir(parents=True)
    cached.write_text(json.dumps({"id": "aime25-0", "problem": "p", "answer": "7"}) + "\n")
    assert ev.load_benchmark("AIME-2025") == ("aime25", [{"id": "aime25-0", "problem": "p",
                                                          "answer": "7"}])


# ---------------------------------------------------------------- evaluate


class ScriptedGenerator:
    """A Generator whose completions are scripted per problem."""

    def __init__(self, script: dict[str, list[str]]):
        self.script = script
        self.stats = GenerationStats()
        self.calls: list[tuple[int, int, SamplingParams]] = []

    def generate(self, prompts, n, params):
        self.calls.append((len(prompts), n, params))
        out = []
        for chat in prompts:
            user = chat[-1]["content"]
            (problem,) = [p for p in self.script if p in user]
            out.append(self.script[problem][:n])
        return out


ITEMS = [{"id": "a", "problem": "What is 2+2?", "answer": "4"},
         {"id": "b", "problem": "What is 3/4 as a fraction?", "answer": "\\frac{3}{4}"},
         {"id": "c", "problem": "What is 10-3?", "answer": "7"}]


def test_evaluate_greedy_pass_at_1():
    gen = ScriptedGenerator({"What is 2+2?": ["\\boxed{4}"],
                             "What is 3/4 as a fraction?": ["it is \\boxed{0.75}"],
                             "What is 10-3?": ["I think 7"]})  # right value, but no box
    results = ev.evaluate(gen, {"toy": ITEMS}, batch=2)
    # 2 of 3 boxed answers right -> pass@1 = 2/3
    assert results["benchmarks"]["toy"] == {"n": 3, "pass@1": pytest.approx(2 / 3)}
    assert results["average"] == pytest.approx(2 / 3)
    assert results["metrics"] == ["pass@1"]
    # batch=2 -> two calls of 2 and 1 prompts, greedy with one sample each
    assert [(size, n) for size, n, _ in gen.calls] == [(2, 1), (1, 1)]
    assert all(p.temperature == 0.0 for _, _, p in gen.calls)
    assert [r["correct"] for r in results["items"]] == [[True], [True], [False]]
    assert results["items"][2]["predictions"] == [None]


def test_evaluate_mean_and_majority_at_k():
    gen = ScriptedGenerator({
        "What is 2+2?": ["\\boxed{4}", "\\boxed{4}", "\\boxed{5}"],
        "What is 3/4 as a fraction?": ["\\boxed{1}", "\\boxed{1}", "\\boxed{\\frac{3}{4}}"],
        "What is 10-3?": ["\\boxed{7}", "no idea", "\\boxed{7.0}"],
    })
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
    gen = ScriptedGenerator({"What is 2+2?": ["\\boxed{4}"],
                             "What is 3/4 as a fraction?": ["\\boxed{2}"],
                             "What is 10-3?": ["\\boxed{2}"]})
    results = ev.evaluate(gen, {"one": ITEMS[:1], "three": ITEMS})
    # one: 1/1, three: 1/3 -> average = (1 + 1/3) / 2 = 2/3 (not pooled 2/4)
    assert results["average"] == pytest.approx(2 / 3)


def test_evaluate_by_name_with_limit_and_write_results(tmp_path):
    synthetic = ev.synthetic_benchmark()[:4]
    gen = ScriptedGenerator({i["problem"]: [f"\\boxed{{{i['answer']}}}"] for i in synthetic})
    results = ev.evaluate(gen, ["synthetic"], limit=4)
    assert results["benchmarks"]["synthetic"] == {"n": 4, "pass@1": 1.0}
    json_path, md_path = ev.write_results(results, tmp_path / "out")
    saved = json.loads(json_path.read_text())
    assert saved["benchmarks"] == results["benchmarks"]
    assert saved["items"][0]["completions"] == [f"\\boxed{{{synthetic[0]['answer']}}}"]
    md = md_path.read_text()
    assert "| synthetic | 4 | 100.0 |" in md
    assert "| **average** | | 100.0 |" in md
    assert not list((tmp_path / "out").glob(".*"))  # no temp files left behind


def test_cli_fails_before_loading_a_model(tmp_path, capsys):
    rc = ev.cli_main(["--model", "/nonexistent/model", "--benchmarks",
                      f"synthetic,{tmp_path / 'absent.jsonl'}", "--output", str(tmp_path)])
    assert rc == 2
    assert "no such file" in capsys.readouterr().err


# ---------------------------------------------------------------- a real model


def test_cli_end_to_end_with_a_tiny_checkpoint(tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "eval"
    rc = ev.cli_main(["--model", str(tiny_checkpoint), "--benchmarks", "synthetic",
                      "--limit", "2", "--max-new-tokens", "4", "--output", str(out)])
    assert rc == 0
    saved = json.loads((out / "eval.json").read_text())
    assert saved["model"] == str(tiny_checkpoint)
    assert saved["benchmarks"]["synthetic"]["n"] == 2
    assert "| synthetic | 2 |" in (out / "eval.md").read_text()
    assert "| synthetic | 2 |" in capsys.readouterr().out




def test_evaluate_with_a_tiny_llama_end_to_end(tokenizer):
    # tokenizer: the embedded SmolLM2's (conftest), converted locally, no download
    gen = HFGenerator(tiny_llama(tokenizer), tokenizer, batch_size=5)
    results = ev.evaluate(gen, ["synthetic"], limit=5, max_new_tokens=8)
    row = results["benchmarks"]["synthetic"]
    assert row["n"] == 5
    assert 0.0 <= row["pass@1"] <= 1.0  # random weights: whatever it is
    assert all(len(r["completions"]) == 1 and isinstance(r["completions"][0], str)
               for r in results["items"])
    assert results["timing"]["new_tokens"] > 0
