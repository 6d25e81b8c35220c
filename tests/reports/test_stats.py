"""The interval arithmetic of rzero.stats, each formula checked on numbers worked by hand."""

import math

import numpy as np
import pytest

from rzero import stats
from rzero.stats import (
    clopper_pearson_interval,
    mcnemar_exact_p,
    paired_difference,
    phi_coefficient,
    slope_interval,
    stratified_paired_difference,
    wilson_interval,
)

# --- one proportion --------------------------------------------------------------------


def test_audit_uses_the_one_wilson_interval():
    from rzero.audit import wilson_interval as audit_wilson
    from rzero.audit.report import wilson_interval as report_wilson

    assert audit_wilson is stats.wilson_interval and report_wilson is stats.wilson_interval


def test_wilson_seven_of_ten():
    # p 0.7, z² 3.8416: center (0.7 + 0.19208) / 1.38416 = 0.64449;
    # half 1.96 / 1.38416 * sqrt(0.021 + 0.009604) = 0.24772
    lo, hi = wilson_interval(7, 10)
    assert (lo, hi) == pytest.approx((0.64449 - 0.24772, 0.64449 + 0.24772), abs=1e-4)


def test_clopper_pearson_zero_of_ten_has_a_closed_form():
    # k = 0: high = 1 - (α/2)^(1/n) = 1 - 0.025^(1/10) = 0.30850
    assert clopper_pearson_interval(0, 10) == pytest.approx((0.0, 1 - 0.025**0.1))


def test_clopper_pearson_all_of_ten_mirrors_it():
    # k = n: low = (α/2)^(1/n) = 0.69150
    assert clopper_pearson_interval(10, 10) == pytest.approx((0.025**0.1, 1.0))


def test_clopper_pearson_is_wider_than_wilson():
    cp, w = clopper_pearson_interval(7, 10), wilson_interval(7, 10)
    assert cp[0] < w[0] and cp[1] > w[1]


# --- McNemar -----------------------------------------------------------------------------


def test_mcnemar_nine_against_one():
    # D = 10 fair coins: P(X <= 1) = (1 + 10) / 1024, two-sided 22 / 1024 = 0.0215
    assert mcnemar_exact_p(9, 1) == pytest.approx(22 / 1024)


def test_mcnemar_balanced_discordance_is_p_one():
    # 5 v 5: 2 * P(X <= 5) = 2 * 638/1024 > 1 -> 1
    assert mcnemar_exact_p(5, 5) == 1.0


def test_mcnemar_no_discordant_pair_is_p_one():
    assert mcnemar_exact_p(0, 0) == 1.0


# --- paired differences ------------------------------------------------------------------

A = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]  # 5 of 10 right
B = [1, 1, 1, 1, 0, 1, 1, 1, 0, 0]  # 7 of 10: three gained (n01), one lost (n10)


def test_paired_difference_counts_the_discordant_pairs():
    # Δ = (n01 - n10) / n = (3 - 1) / 10 = 0.2
    d = paired_difference(A, B, n_boot=2000)
    assert (d.n01, d.n10) == (3, 1)
    assert d.delta == pytest.approx(0.2)
    assert (d.mean_a, d.mean_b) == pytest.approx((0.5, 0.7))


def test_paired_difference_exact_mcnemar():
    # D = 4: P(X <= 1) = (1 + 4) / 16, two-sided 10/16
    assert paired_difference(A, B, n_boot=100).mcnemar_p == pytest.approx(10 / 16)


def test_paired_difference_exact_interval_conditional_on_discordant_pairs():
    # π = n01/D = 3/4; π_hi = Beta(4, 1) quantile 0.975 = 0.975^(1/4) = 0.99369
    # Δ_high = (D/n)(2π_hi - 1) = 0.4 * (2 * 0.99369 - 1) = 0.39495
    # π_lo = Beta(3, 2) quantile 0.025 = 0.19412 -> Δ_low = 0.4 * (2 * 0.19412 - 1) = -0.24470
    d = paired_difference(A, B, n_boot=100)
    assert d.exact_high == pytest.approx(0.4 * (2 * 0.975**0.25 - 1))
    assert d.exact_low == pytest.approx(0.4 * (2 * 0.19412045 - 1))


def test_paired_bootstrap_matches_a_naive_loop():
    # the same seed: replicate r resamples n items, Δ_r = mean of d over them
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 2, 40), rng.integers(0, 2, 40)
    d = (b - a).astype(float)
    naive_rng = np.random.default_rng(11)
    reps = [d[naive_rng.integers(0, 40, size=40)].mean() for _ in range(2500)]
    lo, hi = np.quantile(reps, [0.025, 0.975])
    got = paired_difference(a, b, n_boot=2500, seed=11)
    assert (got.ci_low, got.ci_high) == pytest.approx((lo, hi))


def test_paired_bootstrap_is_reproducible():
    assert paired_difference(A, B, seed=5) == paired_difference(A, B, seed=5)


def test_identical_differences_give_a_point_interval():
    # every item gained: d = 1 everywhere, every replicate's mean is 1
    d = paired_difference([0] * 8, [1] * 8, n_boot=200)
    assert (d.ci_low, d.ci_high) == (1.0, 1.0)


def test_fractional_scores_have_no_mcnemar():
    d = paired_difference([0.5, 0.25], [0.75, 0.25], n_boot=100)
    assert d.delta == pytest.approx(0.125)  # (0.25 + 0) / 2
    assert d.mcnemar_p is None and d.exact_low is None


def test_paired_difference_needs_the_same_items():
    with pytest.raises(ValueError, match="same items"):
        paired_difference([1, 0], [1, 0, 1])


def test_stratified_average_is_unweighted():
    # stratum 1: 10 items, +0.2; stratum 2: 4 items, 0.0 -> (0.2 + 0.0) / 2 = 0.1
    d = stratified_paired_difference([(A, B), ([1, 0, 1, 0], [1, 0, 1, 0])], n_boot=500)
    assert d.delta == pytest.approx(0.1)
    assert d.n == 14
    assert d.ci_low <= 0.1 <= d.ci_high


def test_words_show_delta_and_interval():
    d = paired_difference([0] * 8, [1] * 8, n_boot=10)
    assert d.words() == "+1.000 [+1.000, +1.000]"


# --- slope -------------------------------------------------------------------------------


def test_slope_of_three_points():
    # x̄ 2, ȳ 5/3, Sxx 2, Sxy 1 -> b 0.5, a 2/3; residuals -1/6, 1/3, -1/6 -> SSE 1/6,
    # s² = SSE / (n - 2) = 1/6, se = sqrt(s² / Sxx) = sqrt(1/12) = 0.28868;
    # t(0.975, 1 df) = 12.7062 -> 0.5 ± 3.6680
    s = slope_interval([1, 2, 3], [1, 2, 2])
    assert (s.slope, s.intercept) == pytest.approx((0.5, 2 / 3))
    assert s.stderr == pytest.approx(math.sqrt(1 / 12))
    assert (s.ci_low, s.ci_high) == pytest.approx(
        (0.5 - 12.7062 * 0.28868, 0.5 + 12.7062 * 0.28868), abs=1e-3
    )


def test_exact_line_has_a_point_interval():
    s = slope_interval([0, 1, 2, 3], [1, 3, 5, 7])  # y = 1 + 2x
    assert (s.slope, s.ci_low, s.ci_high) == pytest.approx((2.0, 2.0, 2.0))


def test_two_points_have_no_interval():
    s = slope_interval([1, 2], [0.1, 0.3])
    assert s.slope == pytest.approx(0.2) and s.ci_low is None and s.ci_high is None


def test_constant_x_is_rejected():
    with pytest.raises(ValueError, match="x are equal"):
        slope_interval([1, 1, 1], [0, 1, 2])


# --- phi ---------------------------------------------------------------------------------

# the seed's example (§6.2): each role wrong on 30 of 100 items, both wrong on 25
E_A = [1] * 25 + [1] * 5 + [0] * 5 + [0] * 65
E_B = [1] * 25 + [0] * 5 + [1] * 5 + [0] * 65


def test_phi_of_the_seed_example():
    # (n11·n00 - n10·n01) / sqrt(30·70·30·70) = (25·65 - 5·5) / 2100 = 1600/2100 = 0.7619
    assert phi_coefficient(E_A, E_B).phi == pytest.approx(1600 / 2100)


def test_phi_fisher_z_interval():
    # z = atanh(0.7619) = 1.00074, se = 1/sqrt(97) = 0.101535
    # tanh(1.00074 ∓ 1.96·0.101535) = tanh(0.80173), tanh(1.19975) = 0.6650, 0.8336
    c = phi_coefficient(E_A, E_B)
    assert (c.ci_low, c.ci_high) == pytest.approx((0.6650, 0.8336), abs=1e-3)


def test_phi_is_undefined_for_a_constant_vector():
    # a role that makes no error: the margin n1· is 0, φ = 0/0
    assert phi_coefficient([0, 0, 0, 0, 0], [1, 0, 1, 0, 0]).phi is None


def test_independent_vectors_have_phi_zero():
    # n11 = n10 = n01 = n00 = 1 -> (1·1 - 1·1) / sqrt(2·2·2·2) = 0
    assert phi_coefficient([1, 1, 0, 0], [1, 0, 1, 0]).phi == 0.0
