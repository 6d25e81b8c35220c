"""The audit a zero-sum game needs (seed 000 §6.1–6.2): who beats whom across the history of
checkpoints, whether one rating explains it, and how exploitable the history is.

    score            a game's value for one player: 1 won, ½ tie, 0 lost (violations leave
                     the game out)
    win_matrix       W_ij: player i's mean score against player j over the games they played,
                     each pair with both role assignments, with the game counts
    bradley_terry    strengths s_i with P(i beats j) = s_i / (s_i + s_j), fitted to the
                     scores by the minorisation-maximisation iteration (Hunter 2004), and the
                     fit's calibration: predicted against observed W_ij per pair
    nontransitivity  the share of the antisymmetric part of W − ½ that no rating explains
                     (the cyclic component of its Hodge decomposition)
    exploitability   E(μ) = max_i Σ_j μ_j W_ij − ½ for a mixture μ over the players
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rzero.spag.game import ATTACKER, ATTACKER_WINS, DEFENDER_WINS, TIE


def score(outcome: str, role: str) -> float | None:
    """The value of a game with `outcome` for the player of `role`: 1 won, ½ tie, 0 lost;
    None for a violation (the game does not count)."""
    if outcome == TIE:
        return 0.5
    if outcome not in (ATTACKER_WINS, DEFENDER_WINS):
        return None
    return float((outcome == ATTACKER_WINS) == (role == ATTACKER))


def win_matrix(
    games: Sequence[dict[str, Any]], players: Sequence[str]
) -> tuple[list[list[float | None]], list[list[int]]]:
    """(W, n): W[i][j] the mean score of players[i] against players[j] over their games, in
    either role (rows with keys attacker, defender, outcome), None with no counted game;
    n[i][j] the number of counted games. W[i][j] + W[j][i] = 1 wherever both are set."""
    index = {p: i for i, p in enumerate(players)}
    k = len(players)
    total = [[0.0] * k for _ in range(k)]
    n = [[0] * k for _ in range(k)]
    for g in games:
        a, d = index[g["attacker"]], index[g["defender"]]
        s = score(g["outcome"], ATTACKER)
        if s is None or a == d:
            continue
        total[a][d] += s
        total[d][a] += 1 - s
        n[a][d] += 1
        n[d][a] += 1
    w = [[total[i][j] / n[i][j] if n[i][j] else None for j in range(k)] for i in range(k)]
    return w, n


def bradley_terry(
    w: Sequence[Sequence[float | None]],
    n: Sequence[Sequence[int]],
    iterations: int = 500,
    tol: float = 1e-10,
) -> dict[str, Any]:
    """Bradley–Terry strengths from the win matrix (a tie counts half a win to each side):
    s_i ← W_i / Σ_j n_ij / (s_i + s_j), W_i = Σ_j n_ij W_ij, normalised to a geometric mean
    of 1, with a half-game prior against a virtual player of strength 1 so that a player
    who won or lost everything keeps a finite strength. Returns the strengths, the
    Elo-scale ratings 400 log10 s_i, and per played pair the predicted s_i / (s_i + s_j)
    beside the observed W_ij (the calibration check), with their mean absolute gap."""
    k = len(w)
    wins = [sum(n[i][j] * w[i][j] for j in range(k) if w[i][j] is not None) + 0.5 for i in range(k)]
    s = [1.0] * k
    for _ in range(iterations):
        new = []
        for i in range(k):
            denom = sum(n[i][j] / (s[i] + s[j]) for j in range(k) if j != i and n[i][j])
            denom += 1.0 / (s[i] + 1.0)  # the prior's one game against strength 1
            new.append(wins[i] / denom)
        done = max(abs(a - b) for a, b in zip(new, s, strict=True)) < tol
        s = new  # the prior's player (strength 1) fixes the scale: no renormalising here
        if done:
            break
    g = math.exp(sum(math.log(x) for x in s) / k)
    s = [x / g for x in s]
    pairs = [
        {"i": i, "j": j, "observed": w[i][j], "predicted": s[i] / (s[i] + s[j]), "games": n[i][j]}
        for i in range(k)
        for j in range(i + 1, k)
        if n[i][j]
    ]
    gap = sum(abs(p["observed"] - p["predicted"]) for p in pairs) / len(pairs) if pairs else None
    return {
        "strength": s,
        "elo": [400 * math.log10(x) for x in s],
        "pairs": pairs,
        "calibration_gap": gap,
    }


def nontransitivity(w: Sequence[Sequence[float | None]]) -> dict[str, float] | None:
    """With A = W − ½ on the played pairs (antisymmetric), the least-squares ratings r
    (A_ij ≈ r_i − r_j; on a complete matrix r_i is the row mean of A) split A into a
    transitive part r_i − r_j and a cyclic residual; returns ‖residual‖ / ‖A‖ (0: one
    ranking explains every result; near 1: rock-paper-scissors) and ‖A‖. None when fewer
    than three players have all their pairs played (two players are always transitive)."""
    k = len(w)
    if k < 3 or any(w[i][j] is None for i in range(k) for j in range(k) if i != j):
        return None
    a = [[(w[i][j] - 0.5) if i != j else 0.0 for j in range(k)] for i in range(k)]
    r = [sum(row) / k for row in a]
    resid = [[a[i][j] - (r[i] - r[j]) for j in range(k)] for i in range(k)]
    norm = math.sqrt(sum(x * x for row in a for x in row))
    rnorm = math.sqrt(sum(x * x for row in resid for x in row))
    return {"cyclic_share": rnorm / norm if norm else 0.0, "norm": norm}


def exploitability(w: Sequence[Sequence[float | None]], mixture: Sequence[float]) -> float:
    """E(μ) = max_i Σ_j μ_j W_ij − ½: how much the best single player of the matrix scores
    above a draw against the mixture μ (unplayed pairs and the diagonal count ½). 0 means no
    player in the history beats the mixture; the seed's test that a population did not just
    cycle."""
    k = len(w)
    if len(mixture) != k or abs(sum(mixture) - 1) > 1e-9:
        raise ValueError("mixture: one weight per player, summing to 1")
    best = max(
        sum(mixture[j] * (w[i][j] if w[i][j] is not None and i != j else 0.5) for j in range(k))
        for i in range(k)
    )
    return best - 0.5
