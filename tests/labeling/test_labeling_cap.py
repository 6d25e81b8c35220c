"""`cap_label_share` against a naive reference on random pools."""

import math
import random

import pytest

from rzero.labeling.filtering import cap_label_share


def _naive(labels, p_hats, kept, share):
    """Repeatedly drop, from the most over-represented label, its kept question farthest
    from p_hat 1/2 (latest in the pool among ties) until no label is over the limit."""
    limit = max(1, math.floor(share * sum(kept) + 1e-9))
    out = list(kept)
    while True:
        counts = {}
        for i, k in enumerate(out):
            if k:
                counts.setdefault(str(labels[i]).strip(), []).append(i)
        over = [m for m in counts.values() if len(m) > limit]
        if not over:
            return out
        worst = max(over[0], key=lambda i: (abs(p_hats[i] - 0.5), i))
        out[worst] = False


@pytest.mark.parametrize("seed", range(200))
def test_cap_matches_the_naive_reference(seed):
    rng = random.Random(seed)
    n = rng.randint(0, 30)
    labels = [rng.choice(["1", "7", " 7", "12", None]) for _ in range(n)]
    p_hats = [rng.choice([0.25, 0.375, 0.5, 0.625, 0.75]) for _ in range(n)]
    kept = [lab is not None and rng.random() < 0.8 for lab in labels]
    share = rng.choice([0.1, 0.25, 0.5, 1.0])
    capped = cap_label_share(labels, p_hats, kept, share)
    assert capped == _naive(labels, p_hats, kept, share)
    assert all(k or not c for k, c in zip(kept, capped, strict=True))  # the cap only drops


def test_cap_bounds_and_errors():
    assert cap_label_share(["1"] * 4, [0.5] * 4, [True] * 4, 0.1) == [True, False, False, False]
    assert cap_label_share(["1", "2"], [0.5, 0.5], [True, True], 0.5) == [True, True]
    with pytest.raises(ValueError, match="share"):
        cap_label_share([], [], [], 0.0)
    with pytest.raises(ValueError, match="one entry per question"):
        cap_label_share(["1"], [], [True], 0.5)
