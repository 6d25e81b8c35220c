"""The increment curve: per-iteration change against the previous iteration and the base."""

import pytest

from rzero.selfplay.increments import increment_curve

N = 40


def vec(right: int) -> list[int]:
    """N items, the first `right` of them right (so later iterations add or drop items)."""
    return [1] * right + [0] * (N - right)


def test_changes_against_previous_and_base():
    # pass@1 0.25 -> 0.5 -> 0.55: +0.25 then +0.05 against the previous; +0.30 against base
    curve = increment_curve({"easy": [vec(10), vec(20), vec(22)]}, n_boot=500)
    it2 = curve["iterations"][2]
    assert it2["pass@1"]["easy"] == pytest.approx(0.55)
    assert it2["vs_previous"]["easy"]["delta"] == pytest.approx(0.05)
    assert it2["vs_base"]["easy"]["delta"] == pytest.approx(0.30)
    # 10 items gained and none lost: McNemar 2 * 0.5^10
    assert curve["iterations"][1]["vs_previous"]["easy"]["mcnemar_p"] == pytest.approx(2 / 1024)


def test_the_base_has_no_change():
    curve = increment_curve({"easy": [vec(10), vec(12)]}, n_boot=100)
    assert set(curve["iterations"][0]) == {"iteration", "pass@1"}


def test_average_is_unweighted_over_benchmarks():
    # easy +0.25, hard 0.0 -> average +0.125
    curve = increment_curve({"easy": [vec(10), vec(20)], "hard": [vec(4), vec(4)]}, n_boot=200)
    it1 = curve["iterations"][1]
    assert it1["vs_previous"]["average"]["delta"] == pytest.approx(0.125)
    assert it1["pass@1"]["average"] == pytest.approx((0.5 + 0.1) / 2)
    assert it1["watch"]["increment"] == pytest.approx(0.125)


def test_a_shrinking_gain_is_flagged():
    curve = increment_curve({"easy": [vec(10), vec(20), vec(22)]}, n_boot=500)
    assert any(
        f.startswith("the gain per iteration fell: +0.250 at iteration 1, +0.050 at iteration 2")
        for f in curve["flags"]
    )


def test_a_clear_drop_is_flagged_and_feeds_the_watch():
    # 0.75 -> 0.25: 20 items lost, none gained; every bootstrap replicate is negative
    curve = increment_curve({"easy": [vec(30), vec(10)]}, n_boot=500)
    assert curve["flags"][0].startswith("iteration 1 is below iteration 0 on average: -0.500")
    assert curve["iterations"][1]["watch"]["increment_ci_high"] < 0


def test_a_small_drop_is_called_possible_noise():
    # one item lost of 40: the interval reaches 0
    curve = increment_curve({"easy": [vec(20), vec(19)]}, n_boot=500)
    assert "the interval includes 0, so the drop may be noise" in curve["flags"][0]


def test_falling_below_the_base_is_flagged():
    curve = increment_curve({"easy": [vec(30), vec(30), vec(10)]}, n_boot=500)
    assert any(
        f.startswith("iteration 2 is below the base model on average") for f in curve["flags"]
    )


def test_benchmarks_need_the_same_iterations():
    with pytest.raises(ValueError, match="same iterations"):
        increment_curve({"a": [vec(1), vec(2)], "b": [vec(1)]})


def test_each_iteration_carries_its_own_flags():
    curve = increment_curve({"easy": [vec(30), vec(10), vec(10)]}, n_boot=300)
    assert curve["iterations"][1]["flags"][0].startswith("iteration 1 is below iteration 0")
    assert not any(f.startswith("iteration 1") for f in curve["iterations"][2]["flags"])


def test_eval_items_are_paired_by_id():
    from rzero.selfplay.increments import align_eval_items

    base = {
        "items": [
            {"benchmark": "easy", "id": "a", "mean": 1.0},
            {"benchmark": "easy", "id": "b", "mean": 0.0},
            {"benchmark": "hard", "id": "h", "mean": 0.0},
        ]
    }
    # iteration 1 scored the items in another order and never scored "hard"
    it1 = {
        "items": [
            {"benchmark": "easy", "id": "b", "mean": 1.0},
            {"benchmark": "easy", "id": "a", "mean": 1.0},
        ]
    }
    assert align_eval_items([base, it1]) == {"easy": [[1.0, 0.0], [1.0, 1.0]]}


def test_paired_scores_average_is_stratified_or_the_one_benchmark():
    import random

    from rzero.selfplay.increments import paired_scores
    from rzero.stats import paired_difference, stratified_paired_difference

    rng = random.Random(3)
    x = [[rng.randint(0, 1) for _ in range(40)] for _ in range(2)]
    y = [[rng.randint(0, 1) for _ in range(25)] for _ in range(2)]
    one = paired_scores({"x": (x[0], x[1])}, n_boot=500, seed=4)
    assert one["average"].to_dict() == one["x"].to_dict()
    assert one["x"].to_dict() == paired_difference(x[0], x[1], n_boot=500, seed=4).to_dict()
    assert one["average"].mcnemar_p is not None
    two = paired_scores({"x": (x[0], x[1]), "y": (y[0], y[1])}, n_boot=500, seed=4)
    want = stratified_paired_difference([(x[0], x[1]), (y[0], y[1])], n_boot=500, seed=4)
    assert two["average"].to_dict() == want.to_dict()
    assert two["y"].delta == pytest.approx(sum(y[1]) / 25 - sum(y[0]) / 25)
    with pytest.raises(ValueError, match="no benchmarks"):
        paired_scores({})
