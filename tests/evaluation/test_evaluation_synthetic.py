"""The embedded benchmark: labels recomputed independently, composition, determinism."""

from __future__ import annotations

import ast
import operator
import re
from collections import Counter
from fractions import Fraction

import pytest

from rzero.evaluation import load_benchmark
from rzero.evaluation import synthetic as syn
from rzero.labeling.equivalence import equivalent_many

# ---------------------------------------------------------------- independent reference
#
# The synthetic generator computes answers with sympy; here they are recomputed from each
# item's structured `data` with plain fractions.Fraction, on a separate code path.

_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
_AST_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


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
    return syn.synthetic_benchmark()


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
    assert set(cells) == {(t, k) for t in syn.SYNTHETIC_TIERS for k in syn.SYNTHETIC_KINDS}
    assert set(cells.values()) == {syn.SYNTHETIC_PER_CELL}
    assert len({item["id"] for item in synthetic}) == len(synthetic)
    assert len({item["problem"] for item in synthetic}) == len(synthetic)
    # interleaved: the first 15 items already cover every (tier, kind) cell
    assert len({(i["tier"], i["kind"]) for i in synthetic[:15]}) == 15


def test_synthetic_problem_text_states_the_stored_data(synthetic):
    for item in synthetic:
        if item["kind"] == "arithmetic":
            latex = re.search(r"\$(.*)\$", item["problem"]).group(1)
            assert latex.replace("\\times", "*").replace("\\div", "/") == item["data"]["expression"]
        elif item["kind"] == "fractions":
            shown = re.findall(r"\\frac\{(\d+)\}\{(\d+)\}", item["problem"])
            assert [[int(n), int(d)] for n, d in shown] == item["data"]["fractions"]


def test_synthetic_is_deterministic_and_seeded(synthetic):
    assert syn.synthetic_benchmark() == synthetic
    other = syn.synthetic_benchmark(seed=1)
    assert len(other) == len(synthetic)
    assert {i["problem"] for i in other} != {i["problem"] for i in synthetic}
    assert load_benchmark("synthetic:1") == ("synthetic:1", other)


def test_synthetic_answers_are_understood_by_the_scorer(synthetic):
    # each stored answer against the same value written as p/q, and against value + 1
    right = [
        (f"{v.numerator}/{v.denominator}", item["answer"])
        for item in synthetic
        for v in [parse_stored(item["answer"])]
    ]
    wrong = [(str(parse_stored(item["answer"]) + 1), item["answer"]) for item in synthetic]
    assert equivalent_many(right) == [True] * len(right)
    assert equivalent_many(wrong) == [False] * len(wrong)


def test_render_answer():
    from sympy import Rational

    assert syn.render_answer(Rational(12)) == "12"
    assert syn.render_answer(Rational(-3, 4)) == "-\\frac{3}{4}"
    assert syn.render_answer(Rational(594, 5), "decimal") == "118.8"
    assert syn.render_answer(Rational(-1, 40), "decimal") == "-0.025"
    assert syn.render_answer(Rational(1, 3), "decimal") == "\\frac{1}{3}"  # not terminating
