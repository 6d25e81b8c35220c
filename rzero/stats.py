"""The interval arithmetic every report uses, one named function per formula.

    wilson_interval               a proportion k/n (label accuracy, pass@1, error rates)
    clopper_pearson_interval      a proportion, exact (used for McNemar's discordant pairs)
    mcnemar_exact_p               exact McNemar test on the discordant pairs of paired 0/1 data
    paired_difference             pass@1 of b minus pass@1 of a on the same items, with intervals
    stratified_paired_difference  the same for an unweighted average over benchmarks
    slope_interval                least-squares slope over steps, t interval
    mean_interval                 a mean with its t interval (SPIN's held-out margins)
    phi_coefficient               correlation of two 0/1 vectors, Fisher-z interval

Which paired interval the reports show: the paired bootstrap (`PairedDifference.ci_low`,
`ci_high`). It applies to mean@k scores as well as 0/1 ones, and to averages over
benchmarks (resampled within each benchmark). For 0/1 scores the exact McNemar p-value and
the exact interval conditional on the discordant pairs are kept beside it (`mcnemar_p`,
`exact_low`, `exact_high`) as a check that needs no resampling. Every bootstrap has a fixed
seed, so a report rebuilt from the same files shows the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats as _sp

__all__ = [
    "Correlation",
    "PairedDifference",
    "Slope",
    "clopper_pearson_interval",
    "mcnemar_exact_p",
    "mean",
    "mean_interval",
    "paired_difference",
    "phi_coefficient",
    "slope_interval",
    "stratified_paired_difference",
    "wilson_interval",
]

_BOOT_CHUNK = 1000  # bootstrap replicates drawn at once: [chunk, n] indices in memory


def mean(values: Iterable[float], empty: float | None = 0.0) -> float | None:
    """The arithmetic mean of `values`; `empty` (0 unless asked otherwise: the reports show
    0 for a phase with nothing to average) when there are none."""
    vals = [float(v) for v in values]
    return sum(vals) / len(vals) if vals else empty


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return float(_sp.norm.ppf(0.5 + confidence / 2))


# ---------------------------------------------------------------- one proportion


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion k/n (95 % for z = 1.96).

    With p = k/n:
        center = (p + z²/(2n)) / (1 + z²/n)
        half   = z / (1 + z²/n) * sqrt(p(1 − p)/n + z²/(4n²))
        interval = [center − half, center + half]
    (Wilson 1927; Agresti & Coull 1998). Unlike p ± z·sqrt(p(1−p)/n) it stays inside [0, 1]
    and does not collapse to a point at k = 0 or k = n. With n = 0 nothing is known: [0, 1].
    """
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"wilson_interval(k={k}, n={n}): need 0 <= k <= n")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


def clopper_pearson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper–Pearson 1934) interval for a binomial proportion k/n.

        low  = Beta quantile α/2     of Beta(k, n − k + 1)   (0 when k = 0)
        high = Beta quantile 1 − α/2 of Beta(k + 1, n − k)   (1 when k = n)
    with α = 1 − confidence. It covers at least `confidence` for every true p (so it is wider
    than Wilson's). n = 0: [0, 1].
    """
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"clopper_pearson_interval(k={k}, n={n}): need 0 <= k <= n")
    alpha = 1.0 - confidence
    _z(confidence)  # validates confidence
    if n == 0:
        return 0.0, 1.0
    low = 0.0 if k == 0 else float(_sp.beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(_sp.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return low, high


# ---------------------------------------------------------------- paired differences


def mcnemar_exact_p(n01: int, n10: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs of paired 0/1 outcomes.

    n01 = items a got wrong and b right, n10 = items a got right and b wrong; D = n01 + n10.
    Under "a and b are equally good" each discordant item is a fair coin, so
    n01 ~ Binomial(D, ½) and
        p = min(1, 2 · P(X ≤ min(n01, n10))),  X ~ Binomial(D, ½).
    Concordant items carry no information about the difference. D = 0: p = 1.
    """
    if n01 < 0 or n10 < 0:
        raise ValueError(f"mcnemar_exact_p(n01={n01}, n10={n10}): counts must be >= 0")
    d = n01 + n10
    if d == 0:
        return 1.0
    return min(1.0, 2.0 * float(_sp.binom.cdf(min(n01, n10), d, 0.5)))


@dataclass(frozen=True)
class PairedDifference:
    """mean(b) − mean(a) on the same items, with its intervals (see `paired_difference`)."""

    n: int  # items (all strata)
    mean_a: float
    mean_b: float
    delta: float  # mean_b − mean_a
    ci_low: float  # paired bootstrap, percentile: what reports show
    ci_high: float
    confidence: float
    n_boot: int
    seed: int
    # for 0/1 scores in one stratum only (None otherwise):
    n01: int | None = None  # a wrong, b right
    n10: int | None = None  # a right, b wrong
    mcnemar_p: float | None = None
    exact_low: float | None = None  # exact, conditional on the discordant count
    exact_high: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def words(self, digits: int = 3) -> str:
        """`+0.040 [−0.010, +0.090]` (95 % paired bootstrap)."""
        f = f"{{:+.{digits}f}}"
        return f"{f.format(self.delta)} [{f.format(self.ci_low)}, {f.format(self.ci_high)}]"


def _as_scores(name: str, values: Sequence[float]) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected one score per item, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any((arr < 0) | (arr > 1)):
        raise ValueError(f"{name}: scores must be in [0, 1]")
    return arr


def stratified_paired_difference(
    strata: Sequence[tuple[Sequence[float], Sequence[float]]],
    *,
    confidence: float = 0.95,
    n_boot: int = 10_000,
    seed: int = 0,
) -> PairedDifference:
    """Δ = (1/S) Σ_s [mean(b_s) − mean(a_s)]: the change of an unweighted average over S
    strata (benchmarks, as the paper's average), each pair (a_s, b_s) scored on the same items.

    Paired bootstrap (Efron & Tibshirani 1993, percentile interval): each replicate resamples
    the items of every stratum with replacement, separately per stratum (so each benchmark
    keeps its size), recomputes Δ from the per-item differences d_i = b_i − a_i, and the
    interval is the α/2 and 1 − α/2 quantiles of the `n_boot` replicates. Pairing matters:
    the two scores of one item are correlated, and resampling items (not scores) keeps that.
    A stratum with no items is an error (its mean is undefined).
    """
    if not strata:
        raise ValueError("stratified_paired_difference: no strata")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    alpha = 1.0 - confidence
    _z(confidence)
    diffs, means_a, means_b = [], [], []
    for s, (a, b) in enumerate(strata):
        a, b = _as_scores(f"stratum {s} a", a), _as_scores(f"stratum {s} b", b)
        if a.size != b.size:
            raise ValueError(
                f"stratum {s}: {a.size} scores for a but {b.size} for b; a "
                f"paired difference needs the same items"
            )
        if a.size == 0:
            raise ValueError(f"stratum {s}: no items")
        diffs.append(b - a)
        means_a.append(float(a.mean()))
        means_b.append(float(b.mean()))
    rng = np.random.default_rng(seed)
    replicates = np.zeros(n_boot)  # [n_boot] Δ of each replicate
    for d in diffs:
        for start in range(0, n_boot, _BOOT_CHUNK):
            rows = min(_BOOT_CHUNK, n_boot - start)
            idx = rng.integers(0, d.size, size=(rows, d.size))  # [rows, n_s]
            replicates[start : start + rows] += d[idx].mean(axis=1)
    replicates /= len(diffs)
    low, high = np.quantile(replicates, [alpha / 2, 1 - alpha / 2])
    mean_a, mean_b = float(np.mean(means_a)), float(np.mean(means_b))
    return PairedDifference(
        n=sum(d.size for d in diffs),
        mean_a=mean_a,
        mean_b=mean_b,
        delta=mean_b - mean_a,
        ci_low=float(low),
        ci_high=float(high),
        confidence=confidence,
        n_boot=n_boot,
        seed=seed,
    )


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = 0.95,
    n_boot: int = 10_000,
    seed: int = 0,
) -> PairedDifference:
    """Δ = mean(b) − mean(a) for two score vectors on the same items (pass@1 of two models,
    or of one model before and after), with the paired bootstrap interval of
    `stratified_paired_difference` (one stratum).

    For 0/1 scores it adds the exact analysis of the discordant pairs: n01 (a wrong, b right),
    n10 (a right, b wrong), D = n01 + n10, Δ = (n01 − n10)/n; the exact McNemar p-value
    (`mcnemar_exact_p`); and an exact interval conditional on D: with π = n01/D and its
    Clopper–Pearson interval [π_lo, π_hi], Δ = (D/n)(2π − 1) gives
        [ (D/n)(2π_lo − 1), (D/n)(2π_hi − 1) ].
    Conditioning on D ignores the uncertainty in how many items differ, so with few
    discordant pairs the bootstrap and this interval can disagree; both are [0, 0] at D = 0,
    which says "no item changed", not "the models are equal".
    """
    out = stratified_paired_difference([(a, b)], confidence=confidence, n_boot=n_boot, seed=seed)
    a_arr, b_arr = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    binary = np.all((a_arr == 0) | (a_arr == 1)) and np.all((b_arr == 0) | (b_arr == 1))
    if not binary:
        return out
    n = a_arr.size
    n01 = int(np.sum((a_arr == 0) & (b_arr == 1)))
    n10 = int(np.sum((a_arr == 1) & (b_arr == 0)))
    d = n01 + n10
    if d == 0:
        exact = (0.0, 0.0)
    else:
        lo, hi = clopper_pearson_interval(n01, d, confidence)
        exact = (d / n * (2 * lo - 1), d / n * (2 * hi - 1))
    return PairedDifference(
        **{
            **asdict(out),
            "n01": n01,
            "n10": n10,
            "mcnemar_p": mcnemar_exact_p(n01, n10),
            "exact_low": exact[0],
            "exact_high": exact[1],
        }
    )


# ---------------------------------------------------------------- trend over steps


@dataclass(frozen=True)
class Slope:
    """Least-squares line y = intercept + slope·x, with the slope's interval."""

    slope: float
    intercept: float
    ci_low: float | None  # None with fewer than 3 points (no residual degrees of freedom)
    ci_high: float | None
    stderr: float | None
    n: int
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def slope_interval(x: Sequence[float], y: Sequence[float], confidence: float = 0.95) -> Slope:
    """Ordinary least-squares slope of y on x with its t interval.

        b  = Sxy / Sxx,  a = ȳ − b·x̄,   Sxx = Σ(x − x̄)²,  Sxy = Σ(x − x̄)(y − ȳ)
        s² = Σ(y − a − b·x)² / (n − 2),  se(b) = sqrt(s² / Sxx)
        b ± t_{1 − α/2, n − 2} · se(b)
    (e.g. the challenger's reward over its GRPO steps: does it rise?). The interval assumes
    independent, equal-variance residuals; steps of one run are neither quite, so read it as
    a rough guide. Fewer than 3 points: no interval (None). All x equal: an error.
    """
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError(
            f"slope_interval: x and y need the same length, got {xs.shape} and {ys.shape}"
        )
    n = xs.size
    _z(confidence)
    if n < 2:
        raise ValueError(f"slope_interval: need at least 2 points, got {n}")
    sxx = float(np.sum((xs - xs.mean()) ** 2))
    if sxx == 0.0:
        raise ValueError("slope_interval: all x are equal; no slope")
    b = float(np.sum((xs - xs.mean()) * (ys - ys.mean())) / sxx)
    a = float(ys.mean() - b * xs.mean())
    if n < 3:
        return Slope(b, a, None, None, None, n, confidence)
    s2 = float(np.sum((ys - a - b * xs) ** 2) / (n - 2))
    se = math.sqrt(s2 / sxx)
    t = float(_sp.t.ppf(0.5 + confidence / 2, n - 2))
    return Slope(b, a, b - t * se, b + t * se, se, n, confidence)


def mean_interval(
    values: Sequence[float], confidence: float = 0.95
) -> tuple[float, float | None, float | None]:
    """(mean, low, high): x̄ ± t_{1 − α/2, n − 1} · s / √n, with s the sample standard
    deviation. It assumes independent values (one per held-out pair, say); fewer than 2
    values: no interval (None, None). No values: an error."""
    xs = np.asarray(values, dtype=np.float64)
    _z(confidence)
    if xs.size == 0:
        raise ValueError("mean_interval: no values")
    m = float(xs.mean())
    if xs.size < 2:
        return m, None, None
    half = (
        float(_sp.t.ppf(0.5 + confidence / 2, xs.size - 1))
        * float(xs.std(ddof=1))
        / math.sqrt(xs.size)
    )
    return m, m - half, m + half


# ---------------------------------------------------------------- correlated errors


@dataclass(frozen=True)
class Correlation:
    """φ of two 0/1 vectors with its Fisher-z interval (None where undefined)."""

    phi: float | None  # None when one vector is constant
    ci_low: float | None
    ci_high: float | None
    n: int
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def phi_coefficient(
    x: Sequence[bool | int], y: Sequence[bool | int], confidence: float = 0.95
) -> Correlation:
    """φ (Pearson correlation of two 0/1 vectors) with a Fisher-z interval.

    From the 2×2 table n11 (both 1), n10, n01, n00 and its margins n1·, n0·, n·1, n·0:
        φ = (n11·n00 − n10·n01) / sqrt(n1·· n0·· n·1· n·0)
    Interval: z = atanh(φ), se = 1/sqrt(n − 3), [tanh(z − z_α·se), tanh(z + z_α·se)]
    (Fisher 1921). Fisher's transform is exact for bivariate normal data and an
    approximation for 0/1 data, fair for n in the tens and |φ| away from 1; at |φ| = 1 it
    degenerates to [φ, φ]. φ is undefined (None) when either vector is constant, e.g. a role
    that makes no error; the interval is None then and for n ≤ 3.
    """
    xs, ys = np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError(
            f"phi_coefficient: x and y need the same length, got {xs.shape} and {ys.shape}"
        )
    if np.any((xs != 0) & (xs != 1)) or np.any((ys != 0) & (ys != 1)):
        raise ValueError("phi_coefficient: values must be 0/1 (or bool)")
    z_a = _z(confidence)
    n = int(xs.size)
    n11 = int(np.sum((xs == 1) & (ys == 1)))
    n10 = int(np.sum((xs == 1) & (ys == 0)))
    n01 = int(np.sum((xs == 0) & (ys == 1)))
    n00 = n - n11 - n10 - n01
    margins = (n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)
    if margins == 0:
        return Correlation(None, None, None, n, confidence)
    phi = (n11 * n00 - n10 * n01) / math.sqrt(margins)
    phi = max(-1.0, min(1.0, phi))
    if n <= 3:
        return Correlation(phi, None, None, n, confidence)
    if abs(phi) == 1.0:
        return Correlation(phi, phi, phi, n, confidence)
    z, se = math.atanh(phi), 1.0 / math.sqrt(n - 3)
    return Correlation(phi, math.tanh(z - z_a * se), math.tanh(z + z_a * se), n, confidence)
