"""Which pseudo-labelled questions are informative enough to train the solver on.

R-Zero keeps a question only when the solver's vote share is near one half (SPEC §1.3):
|p̂ − ½| ≤ δ with δ = 0.25, i.e. 3..7 of m = 10 answers agree. The official code instead
keeps 0.3 ≤ p̂ ≤ 0.8 with m = 9 votes; `in_band(p_hat, low=0.3, high=0.8)` reproduces it.
`cap_label_share` is not in the paper: it limits how many kept questions may share one label.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from rzero.labeling.voting import Votes

__all__ = ["BAND_EPSILON", "cap_label_share", "in_band", "keep_question", "label_key"]

# p̂ is a ratio like 3/10 = 0.30000000000000004 and 0.5 - 0.3 = 0.2 + 2e-17: without a
# tolerance the band's edges would be decided by rounding error.
BAND_EPSILON = 1e-9


def in_band(
    p_hat: float, delta: float = 0.25, *, low: float | None = None, high: float | None = None
) -> bool:
    """Whether vote share `p_hat` is informative: |p̂ − ½| ≤ δ (R-Zero paper).

    With `low` and/or `high` the band is ``low ≤ p̂ ≤ high`` instead (a missing side
    defaults to 0 or 1); the reference code uses ``low=0.3, high=0.8``. Both edges are
    inclusive, up to `BAND_EPSILON`.
    """
    if not (isinstance(p_hat, (int, float)) and math.isfinite(p_hat) and 0.0 <= p_hat <= 1.0):
        raise ValueError(f"p_hat must be a number in [0, 1], got {p_hat!r}")
    if low is not None or high is not None:
        lo = 0.0 if low is None else low
        hi = 1.0 if high is None else high
        if not 0.0 <= lo <= hi <= 1.0:
            raise ValueError(f"need 0 <= low <= high <= 1, got low={low!r}, high={high!r}")
        return lo - BAND_EPSILON <= p_hat <= hi + BAND_EPSILON
    if not 0.0 <= delta <= 0.5:
        raise ValueError(f"delta must be in [0, 0.5], got {delta!r}")
    return abs(p_hat - 0.5) <= delta + BAND_EPSILON


def keep_question(
    votes: Votes, delta: float = 0.25, *, low: float | None = None, high: float | None = None
) -> bool:
    """A question is kept when it has a label and its p̂ is `in_band`."""
    return votes.label is not None and in_band(votes.p_hat, delta, low=low, high=high)


def label_key(label: object) -> str:
    """Pseudo-labels compared as written, spaces stripped ("7" and "7.0" differ): the key of
    `cap_label_share` and of the collapse watch's label share."""
    return str(label).strip()


def cap_label_share(
    labels: Sequence[str | None], p_hats: Sequence[float], kept: Sequence[bool], share: float
) -> list[bool]:
    """The kept flags after at most max(1, ⌊share · n⌋) of the n kept questions may carry any
    one pseudo-label; of a label's questions, those with p̂ nearest ½ stay (ties: pool order).

    Not in the paper nor the official code. On a small solver the majority vote over
    ill-posed questions settles on a habitual answer ("1", "7"), and a training set mostly
    labelled so teaches the solver to give that answer to everything (the collapse watch's
    `label_mode`); the cap keeps such a label to a bounded part of the training set and
    drops the rest of its questions instead of training on them."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1], got {share!r}")
    if not len(labels) == len(p_hats) == len(kept):
        raise ValueError("labels, p_hats and kept must have one entry per question")
    chosen = [i for i, k in enumerate(kept) if k]
    limit = max(1, math.floor(share * len(chosen) + BAND_EPSILON))
    by_label: dict[str, list[int]] = defaultdict(list)
    for i in chosen:
        by_label[label_key(labels[i])].append(i)
    out = list(kept)
    for members in by_label.values():
        ranked = sorted(members, key=lambda i: (abs(p_hats[i] - 0.5), i))
        for i in ranked[limit:]:
            out[i] = False
    return out
