"""The embedded `easy` tier: 480 one- and two-step items whose answers check out."""

from __future__ import annotations

from collections import Counter

import pytest

from rzero.evaluation import BenchmarkError, load_benchmark
from rzero.evaluation.easy import EASY_PER_TEMPLATE, FIRST, SMALL, TEMPLATES, easy_benchmark


def test_easy_has_forty_distinct_items_per_template_in_a_fixed_order():
    items = easy_benchmark()
    assert len(items) == 12 * 40 == len(TEMPLATES) * EASY_PER_TEMPLATE
    assert Counter(i["kind"] for i in items) == {name: 40 for name in TEMPLATES}
    # two blocks, each interleaved: any prefix of the first 320 is balanced over FIRST
    assert [i["kind"] for i in items[:8]] == list(FIRST)
    assert Counter(i["kind"] for i in items[:160]) == {name: 20 for name in FIRST}
    assert {i["kind"] for i in items[:320]} == set(FIRST)
    assert [i["kind"] for i in items[320:324]] == list(SMALL)
    assert [i["id"] for i in items] == [f"easy-{n:04d}" for n in range(480)]
    assert len({i["problem"] for i in items}) == len(items)
    assert items == easy_benchmark()  # fixed seed
    assert load_benchmark("easy") == ("easy", items)


def test_every_easy_answer_recomputes_from_its_data():
    # recomputed along a different path than the generator's: plain ints from `data`
    formula = {
        "add": lambda d: d["a"] + d["b"],
        "sub": lambda d: d["a"] - d["b"],
        "mul": lambda d: d["a"] * d["b"],
        "add_sub": lambda d: d["a"] + d["b"] - d["c"],
        "mul_add": lambda d: d["a"] * d["b"] + d["c"],
        "word_more": lambda d: d["a"] + d["b"],
        "word_left": lambda d: d["a"] - d["b"],
        "word_groups": lambda d: d["a"] * d["b"] + d["c"],
        "sub_small": lambda d: d["a"] - d["b"],
        "add_tens": lambda d: d["a"] + d["b"],
        "double": lambda d: 2 * d["a"],
        "word_more_small": lambda d: d["a"] + d["b"],
    }
    for item in easy_benchmark():
        value = formula[item["kind"]](item["data"])
        assert value > 0 and item["answer"] == str(value), item
        for number in item["data"].values():
            assert str(number) in item["problem"]


def test_an_easy_development_split_shares_no_problem_with_easy():
    held_out = {i["problem"] for i in easy_benchmark()}
    name, dev = load_benchmark("easy:7")
    assert name == "easy:7" and len(dev) == 480
    assert Counter(i["kind"] for i in dev) == {name: 40 for name in TEMPLATES}
    assert not held_out & {i["problem"] for i in dev}
    assert len({i["id"] for i in dev}) == 480 and not {i["id"] for i in dev} & {
        i["id"] for i in easy_benchmark()
    }
    assert load_benchmark("easy:7")[1] == dev  # fixed seed
    assert load_benchmark("easy:20251130")[1] == easy_benchmark()
    with pytest.raises(BenchmarkError, match="after 'easy:' must be an integer"):
        load_benchmark("easy:dev")


def test_the_first_block_is_the_tier_as_first_measured():
    # items 0-319 (the eight FIRST templates) are drawn exactly as before SMALL was added,
    # so scores reported on them stay comparable; pinned by a few items of that draw
    items = easy_benchmark()
    assert items[0]["problem"] == "What is 36 + 19?" and items[0]["answer"] == "55"
    assert items[1]["problem"] == "What is 21 - 3?"
    assert items[7]["problem"].startswith("Pia has 6 boxes with 5 cookies in each box")
    assert items[11]["problem"] == "What is 40 + 23 - 61?"


def test_small_templates_keep_small_numbers_and_enough_room_for_development_splits():
    for item in easy_benchmark(7):
        d = item["data"]
        if item["kind"] == "sub_small":
            assert 1 <= d["b"] <= 9 and d["b"] < d["a"] <= 19
        elif item["kind"] == "add_tens":
            assert d["a"] % 10 == 0 and 10 <= d["a"] <= 90 and 1 <= d["b"] <= 9
        elif item["kind"] in ("double", "word_more_small"):
            assert all(1 <= v <= 99 for v in d.values())
    for seed in (1, 2, 3):  # each split draws 40 more per template beside the held-out 40
        assert len(load_benchmark(f"easy:{seed}")[1]) == 480
