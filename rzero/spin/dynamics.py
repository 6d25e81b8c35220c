"""SPIN's dynamics on held-out pairs (seed 000 §6.1, "SPIN 更新的动力学").

For iteration k the main player θ_k was trained against the opponent θ_{k−1}; on pairs it
never saw (a held-out prompt x, its data answer y, the opponent's own answer y′):

    margin            Δ = [log pθk(y|x) − log pθk−1(y|x)] − [log pθk(y′|x) − log pθk−1(y′|x)]
    discriminator     the share of pairs with Δ > 0, with its Wilson interval: how well the
      accuracy        main player tells the data from the opponent
    held-out loss     the mean of `spin_loss` (λ of the iteration)
    log-likelihood    mean log pθk(y|x) per token of y: the distance to p_data, which SPIN's
                      fixed point makes as large as the model family allows

Against the iteration before (iteration 0: the base), the per-pair change of that
log-likelihood, paired by held-out prompt (`loglik_change`): SPIN's theory moves p_θ towards
p_data every iteration, so a fall whose interval lies below 0 is reported (`drift_warning`).

The frozen stronger discriminator D (the base plus `spin.discriminator_steps` SFT updates on
the training data, trained once) is scored on the same pairs against the same opponent:
Δ_D = [log p_D(y) − log pθk−1(y)] − [log p_D(y′) − log pθk−1(y′)]. When the main player's
accuracy nears 50 % while D still separates the pairs, the stall is the optimiser's, not a
reached target (`stall_warning`).

Before any of that, the pairs themselves: where the opponent writes the data answer word
for word (y′ = y), Δ = 0 whatever θ, SPIN's loss is ℓ(0) = ln 2 and its gradient is 0. When
most training pairs are such, the iteration has (almost) nothing to learn from: the
opponent already is p_data on those prompts, SPIN's fixed point, which a small SFT set
reaches by being memorised (`fixed_point_warning`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rzero.spin.objective import spin_loss
from rzero.stats import mean_interval, wilson_interval

NEAR_CHANCE = 0.6  # main-player accuracy at or below this counts as "near 50 %"
SEPARATES = 0.75  # the frozen discriminator's accuracy at or above this still separates


def margins(
    policy_chosen: Sequence[float],
    policy_rejected: Sequence[float],
    opponent_chosen: Sequence[float],
    opponent_rejected: Sequence[float],
) -> list[float]:
    """Δ per pair (the argument of SPIN's loss before λ)."""
    return [
        (pc - oc) - (pr - orj)
        for pc, pr, oc, orj in zip(
            policy_chosen, policy_rejected, opponent_chosen, opponent_rejected, strict=True
        )
    ]


def separation(deltas: Sequence[float]) -> dict[str, Any]:
    """Accuracy (Δ > 0) with its Wilson interval, and the mean Δ with its t interval."""
    n = len(deltas)
    right = sum(d > 0 for d in deltas)
    low, high = wilson_interval(right, n)
    mean, m_low, m_high = mean_interval(deltas) if n else (None, None, None)
    return {
        "accuracy": right / n if n else None,
        "accuracy_low": low,
        "accuracy_high": high,
        "right": right,
        "n": n,
        "margin": mean,
        "margin_low": m_low,
        "margin_high": m_high,
    }


def heldout_dynamics(rows: Sequence[dict[str, Any]], lam: float) -> dict[str, Any]:
    """The iteration's held-out numbers from per-pair rows carrying ``policy_chosen``,
    ``policy_rejected``, ``opponent_chosen``, ``opponent_rejected`` (summed log-probs),
    ``chosen_tokens`` and, where a frozen discriminator was scored, ``disc_chosen`` and
    ``disc_rejected``."""

    def col(key: str) -> list[float]:
        return [float(r[key]) for r in rows]

    deltas = margins(
        col("policy_chosen"),
        col("policy_rejected"),
        col("opponent_chosen"),
        col("opponent_rejected"),
    )
    out = {"main": separation(deltas), "lambda": lam}
    loss = spin_loss(
        *(
            torch.tensor(col(k), dtype=torch.float64)
            for k in ("policy_chosen", "policy_rejected", "opponent_chosen", "opponent_rejected")
        ),
        lam,
    )
    out["loss"] = float(loss.mean())
    per_token = [r["policy_chosen"] / max(1, r["chosen_tokens"]) for r in rows]
    ll, ll_low, ll_high = mean_interval(per_token)
    out["loglik"] = {
        "per_token": ll,
        "low": ll_low,
        "high": ll_high,
        "per_answer": sum(col("policy_chosen")) / len(rows),
    }
    out["identical"] = sum(bool(r.get("identical")) for r in rows)
    if all("disc_chosen" in r for r in rows):
        out["discriminator"] = separation(
            margins(
                col("disc_chosen"),
                col("disc_rejected"),
                col("opponent_chosen"),
                col("opponent_rejected"),
            )
        )
    return out


def loglik_summary(tokens: Sequence[int], logps: Sequence[float]) -> dict[str, Any]:
    """Mean log-likelihood per token of the data answers (iteration 0: the base model)."""
    per_token = [lp / max(1, n) for lp, n in zip(logps, tokens, strict=True)]
    ll, low, high = mean_interval(per_token)
    return {"per_token": ll, "low": low, "high": high, "per_answer": sum(logps) / len(logps)}


def loglik_change(
    previous: Sequence[dict[str, Any]], current: Sequence[dict[str, Any]]
) -> dict[str, Any] | None:
    """Mean change of log p(y|x) per token of y from `previous` to `current` held-out rows
    (``id``, ``policy_chosen``, ``chosen_tokens``), paired by id, with its t interval; None
    when no id is in both."""

    def per_token(rows):
        return {r["id"]: r["policy_chosen"] / max(1, r["chosen_tokens"]) for r in rows}

    before, after = per_token(previous), per_token(current)
    shared = [i for i in after if i in before]
    if not shared:
        return None
    delta, low, high = mean_interval([after[i] - before[i] for i in shared])
    return {"delta": delta, "low": low, "high": high, "n": len(shared)}


def drift_warning(change: dict[str, Any] | None, k: int) -> str | None:
    """The held-out data answers became less likely than at iteration k − 1 (interval < 0)."""
    if not change or change["high"] is None or change["high"] >= 0:
        return None
    return (
        f"iteration {k}: the held-out data answers' log-likelihood fell by "
        f"{-change['delta']:.3f} nats per token [{-change['high']:.3f}, "
        f"{-change['low']:.3f}] against iteration {k - 1}: the model moved away from "
        f"p_data, SPIN's fixed point (the margin grew by pushing the opponent's answers "
        f"down, not the data's up)"
    )


def stall_warning(dynamics: dict[str, Any], k: int) -> str | None:
    """Seed §6.1's test: the main player near chance while the frozen discriminator still
    separates the same pairs means the optimiser stalled, not that p_data was reached."""
    main, disc = dynamics["main"], dynamics.get("discriminator")
    if disc is None or main["accuracy"] is None or disc["accuracy"] is None:
        return None
    if main["accuracy"] <= NEAR_CHANCE and disc["accuracy"] >= SEPARATES:
        return (
            f"iteration {k}: the main player tells held-out data answers from the "
            f"opponent's only {main['accuracy']:.0%} of the time while the frozen "
            f"discriminator still does {disc['accuracy']:.0%}: the stall is the "
            f"optimiser's (learning rate, epochs, λ), not a reached p_data"
        )
    return None


# the share of identical training pairs from which an iteration is said to have little to
# learn from
MOSTLY_IDENTICAL = 0.5


def fixed_point_warning(identical: int, pairs: int, k: int) -> str | None:
    """The opponent θ_{k−1} wrote the data answer word for word on at least half of the
    `pairs` training prompts: those pairs give SPIN no gradient (Δ = 0, ℓ(0) = ln 2)."""
    if not pairs or identical / pairs < MOSTLY_IDENTICAL:
        return None
    return (
        f"iteration {k}: the opponent wrote the data answer word for word on {identical} of "
        f"{pairs} training prompts; an identical pair gives SPIN's loss ln 2 and no gradient, "
        f"so the iteration learns from the other {pairs - identical} only (the opponent is "
        f"already p_data there, SPIN's fixed point; a small SFT set reaches it by being "
        f"memorised)"
    )
