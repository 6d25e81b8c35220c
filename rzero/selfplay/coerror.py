"""Role co-error on a calibration set with known answers (seed §6.2, SPEC §9).

Separate weights are not independent evidence: both roles start from one base model and
train on data they make together, so they can share blind spots. The direct measure is on
items with known answers: record each role's error indicator E_A, E_B and compare the rate
at which both are wrong with what independence would predict, P(E_A)·P(E_B). The seed's
example: two roles each 70 % right would both be wrong on 0.3 · 0.3 = 9 % of items if their
errors were independent; 25 % measured means the second role corrects few of the first
one's mistakes. Grouped by item kind as well, because a low overall correlation can hide a
shared blind spot in one kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rzero.stats import phi_coefficient, wilson_interval

__all__ = ["co_error", "role_co_error"]

MIN_ITEMS = 20  # below this many items a group's numbers are reported with a caveat


def co_error(
    a_correct: Sequence[bool],
    b_correct: Sequence[bool],
    names: tuple[str, str] = ("challenger", "solver"),
) -> dict[str, Any]:
    """Co-error numbers of one group of items (95 % intervals):

    accuracy of each role (Wilson),
    joint_error  = P(E_A and E_B)            (Wilson),
    independent  = P(E_A) · P(E_B)           (what independence predicts),
    excess       = joint_error − independent (= cov(E_A, E_B)),
    ratio        = joint_error / independent (None when a role makes no error),
    phi          = corr(E_A, E_B), Fisher-z interval (`rzero.stats.phi_coefficient`).
    """
    if len(a_correct) != len(b_correct):
        raise ValueError(
            f"{len(a_correct)} results for {names[0]} but {len(b_correct)} for "
            f"{names[1]}; both must answer the same items"
        )
    n = len(a_correct)
    err_a = [not bool(x) for x in a_correct]
    err_b = [not bool(x) for x in b_correct]
    k_a, k_b = n - sum(err_a), n - sum(err_b)
    joint = sum(ea and eb for ea, eb in zip(err_a, err_b, strict=True))
    e_a, e_b = (sum(err_a) / n, sum(err_b) / n) if n else (0.0, 0.0)
    independent = e_a * e_b
    phi = phi_coefficient(err_a, err_b)
    out: dict[str, Any] = {
        "n": n,
        f"{names[0]}_accuracy": k_a / n if n else None,
        f"{names[0]}_ci": list(wilson_interval(k_a, n)),
        f"{names[1]}_accuracy": k_b / n if n else None,
        f"{names[1]}_ci": list(wilson_interval(k_b, n)),
        "joint_error": joint / n if n else None,
        "joint_error_ci": list(wilson_interval(joint, n)),
        "independent": independent if n else None,
        "excess": joint / n - independent if n else None,
        "ratio": (joint / n) / independent if n and independent > 0 else None,
        "phi": phi.phi,
        "phi_ci": [phi.ci_low, phi.ci_high],
        "caveat": (f"only {n} items: read these numbers as rough" if n < MIN_ITEMS else None),
    }
    return out


def _words(group: str, c: dict[str, Any], names: tuple[str, str]) -> str | None:
    """A sentence when the errors are positively correlated beyond chance, else None."""
    low = c["phi_ci"][0]
    if c["phi"] is None or low is None or low <= 0:
        return None
    ratio = f" ({c['ratio']:.1f}x)" if c["ratio"] is not None else ""
    return (
        f"{group}: {names[0]} and {names[1]} are both wrong on {c['joint_error']:.1%} of "
        f"{c['n']} items, against {c['independent']:.1%} if their errors were "
        f"independent{ratio}; phi = {c['phi']:.2f} [{c['phi_ci'][0]:.2f}, "
        f"{c['phi_ci'][1]:.2f}]: the second role catches few of the first one's mistakes"
    )


def role_co_error(
    a_correct: Sequence[bool],
    b_correct: Sequence[bool],
    kinds: Sequence[str] | None = None,
    *,
    names: tuple[str, str] = ("challenger", "solver"),
) -> dict[str, Any]:
    """Co-error of two roles answering the same calibration items with known answers.

    `a_correct[i]`, `b_correct[i]`: whether role A (the challenger model answering) and role
    B (the solver model) got item i right; `kinds[i]`: the item's kind (benchmark, topic,
    answer type), or None for one group. Returns ``names``, ``overall`` and ``by_kind``
    (`co_error` of each group, kinds sorted), ``flags`` (a sentence for every group whose φ
    interval lies above 0) and ``watch`` (``co_error_phi``, ``co_error_ci_low`` of the
    overall group, for `rzero.selfplay.collapse.collapse_warnings`).
    """
    if kinds is not None and len(kinds) != len(a_correct):
        raise ValueError(f"{len(kinds)} kinds for {len(a_correct)} items")
    overall = co_error(a_correct, b_correct, names)
    by_kind: dict[str, dict[str, Any]] = {}
    for kind in sorted(set(kinds or [])):
        idx = [i for i, k in enumerate(kinds or []) if k == kind]
        by_kind[kind] = co_error([a_correct[i] for i in idx], [b_correct[i] for i in idx], names)
    flags = [
        w
        for w in [_words("overall", overall, names)]
        + [_words(f"kind {k}", c, names) for k, c in by_kind.items()]
        if w
    ]
    return {
        "names": list(names),
        "overall": overall,
        "by_kind": by_kind,
        "flags": flags,
        "watch": {"co_error_phi": overall["phi"], "co_error_ci_low": overall["phi_ci"][0]},
    }
