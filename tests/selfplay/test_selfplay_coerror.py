"""Role co-error (seed §6.2) on a calibration set with known answers."""

import pytest

from rzero.selfplay.coerror import role_co_error

# the seed's example: both roles 70 % right; both wrong on 25 of 100 items
A = [False] * 25 + [False] * 5 + [True] * 5 + [True] * 65
B = [False] * 25 + [True] * 5 + [False] * 5 + [True] * 65


def test_accuracies_and_joint_error():
    c = role_co_error(A, B)["overall"]
    assert (c["challenger_accuracy"], c["solver_accuracy"]) == (0.7, 0.7)
    assert c["joint_error"] == 0.25


def test_independence_would_predict_the_product_of_error_rates():
    # 0.3 * 0.3 = 0.09; measured 0.25 -> excess 0.16, ratio 0.25 / 0.09 = 2.78
    c = role_co_error(A, B)["overall"]
    assert c["independent"] == pytest.approx(0.09)
    assert c["excess"] == pytest.approx(0.16)
    assert c["ratio"] == pytest.approx(0.25 / 0.09)


def test_correlation_with_its_interval():
    # φ = 1600 / 2100 (tests/reports/test_stats.py works it out)
    c = role_co_error(A, B)["overall"]
    assert c["phi"] == pytest.approx(1600 / 2100)
    assert c["phi_ci"][0] > 0.6


def test_correlated_errors_are_flagged_in_words():
    out = role_co_error(A, B)
    assert out["flags"][0].startswith(
        "overall: challenger and solver are both wrong on 25.0% "
        "of 100 items, against 9.0% if their errors were "
        "independent (2.8x)"
    )
    assert out["watch"]["co_error_phi"] == pytest.approx(1600 / 2100)


def test_a_shared_blind_spot_shows_by_kind():
    # kind "geometry": both always wrong together; kind "algebra": errors never coincide.
    # Overall φ: n11 = 5, n10 = 5, n01 = 5, n00 = 25 -> (5·25 - 25) / sqrt(10·30·10·30) = 1/3
    a = [False] * 5 + [True] * 15 + [False] * 5 + [True] * 5 + [True] * 10
    b = [False] * 5 + [True] * 15 + [True] * 5 + [False] * 5 + [True] * 10
    kinds = ["geometry"] * 20 + ["algebra"] * 20
    out = role_co_error(a, b, kinds)
    assert out["overall"]["phi"] == pytest.approx(1 / 3)
    assert out["by_kind"]["geometry"]["phi"] == pytest.approx(1.0)
    # algebra: n11 = 0, n10 = 5, n01 = 5, n00 = 10 -> (0 - 25) / sqrt(5·15·5·15) = -1/3
    assert out["by_kind"]["algebra"]["phi"] == pytest.approx(-1 / 3)
    assert any(f.startswith("kind geometry:") for f in out["flags"])
    assert not any(f.startswith("kind algebra:") for f in out["flags"])


def test_a_role_with_no_error_has_no_correlation():
    c = role_co_error([True] * 30, [True] * 20 + [False] * 10)["overall"]
    assert c["phi"] is None and c["ratio"] is None and c["joint_error"] == 0.0


def test_small_groups_carry_a_caveat():
    assert role_co_error([True, False], [True, True])["overall"]["caveat"] == (
        "only 2 items: read these numbers as rough"
    )


def test_both_roles_answer_the_same_items():
    with pytest.raises(ValueError, match="same items"):
        role_co_error([True], [True, False])
