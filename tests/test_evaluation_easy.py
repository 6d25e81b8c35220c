"""The embedded `easy` tier: 320 one- and two-step items whose answers check out."""

from __future__ import annotations

from collections import Counter

from rzero.evaluation import load_benchmark
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
