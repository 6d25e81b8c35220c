"""The embedded `easy` tier: 320 one- and two-step items whose answers check out."""

from __future__ import annotations

from collections import Counter

import pytest

from rzero.evaluation import BenchmarkError, load_benchmark
from rzero.evaluation.easy import EASY_PER_TEMPLATE, TEMPLATES, easy_benchmark


def test_easy_has_forty_distinct_items_per_template_in_a_fixed_order():
    items = easy_benchmark()
    assert len(items) == 8 * 40 == len(TEMPLATES) * EASY_PER_TEMPLATE
    assert Counter(i["kind"] for i in items) == {name: 40 for name in TEMPLATES}
    assert len({i["problem"] for i in items}) == len(items)
    assert items == easy_benchmark()  # fixed seed
    assert load_benchmark("easy") == ("easy", items)


def test_every_easy_answer_recomputes_from_its_data():
    # recomputed along a different path than the generator's: plain ints from `data`
    formula = {"add": lambda d: d["a"] + d["b"], "sub": lambda d: d["a"] - d["b"],
               "mul": lambda d: d["a"] * d["b"], "add_sub": lambda d: d["a"] + d["b"] - d["c"],
               "mul_add": lambda d: d["a"] * d["b"] + d["c"],
               "word_more": lambda d: d["a"] + d["b"], "word_left": lambda d: d["a"] - d["b"],
               "word_groups": lambda d: d["a"] * d["b"] + d["c"]}
    for item in easy_benchmark():
        value = formula[item["kind"]](item["data"])
        assert value > 0 and item["answer"] == str(value), item
        for number in item["data"].values():
            assert str(number) in item["problem"]


def test_an_easy_development_split_shares_no_problem_with_easy():
    held_out = {i["problem"] for i in easy_benchmark()}
    name, dev = load_benchmark("easy:7")
    assert name == "easy:7" and len(dev) == 320
    assert Counter(i["kind"] for i in dev) == {name: 40 for name in TEMPLATES}
    assert not held_out & {i["problem"] for i in dev}
    assert len({i["id"] for i in dev}) == 320 and not {i["id"] for i in dev} & {
        i["id"] for i in easy_benchmark()}
    assert load_benchmark("easy:7")[1] == dev  # fixed seed
    assert load_benchmark("easy:20251130")[1] == easy_benchmark()
    with pytest.raises(BenchmarkError, match="after 'easy:' must be an integer"):
        load_benchmark("easy:dev")
