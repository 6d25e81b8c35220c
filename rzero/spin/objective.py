"""SPIN's formulas (Chen et al. 2024; seed 000 §1.3 and §6.1), one named function each.

    spin_loss          L_SPIN per pair: ℓ(λ·log pθ(y|x)/pθt(y|x) − λ·log pθ(y′|x)/pθt(y′|x))
    logistic           ℓ(t) = log(1 + e^(−t)), the paper's choice of ℓ
    ideal_update       Theorem 5.4: p_{t+1} ∝ p_t · (p_data / p_t)^(1/λ)
    log_odds_error     seed §6.1: d_t = log r_t(y1) − log r_t(y2), r_t = p_t / p_data
    merge_pairs        the opponent mixture m_t = Σ_j w_j p_θj: this iteration's pairs and
                       earlier iterations' pairs, each kept with its iteration's weight
    lambda_for         the λ (TRL's β) schedule: 0.1 early, 5.0 near convergence

The training itself runs through TRL's `DPOTrainer` with ``loss_type="sigmoid"`` and
``beta = λ``, the reference model being the iteration's opponent p_θt (the start-of-
iteration weights, its log-probabilities precomputed). TRL's sigmoid loss is
−log σ(β·Δ) = log(1 + e^(−β·Δ)) = ℓ(λ·Δ) with Δ the difference of the two log-ratios: exactly
`spin_loss`; `tests/spin/test_spin_objective.py` checks TRL's loss against this function on a
model's own log-probabilities, and the held-out dynamics (`rzero.spin.dynamics`) call it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F


def logistic(t: torch.Tensor) -> torch.Tensor:
    """ℓ(t) = log(1 + e^(−t)) (SPIN's loss, eq. 4.2's ℓ), computed as softplus(−t) so it
    neither overflows for t ≪ 0 nor loses precision for t ≫ 0."""
    return F.softplus(-t)


def spin_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    opponent_chosen: torch.Tensor,
    opponent_rejected: torch.Tensor,
    lam: float,
) -> torch.Tensor:
    """SPIN's loss per pair (eq. 4.7 of the paper, seed §1.3):

        L = ℓ( λ·[log pθ(y|x) − log pθt(y|x)] − λ·[log pθ(y′|x) − log pθt(y′|x)] )

    with y the data answer (chosen), y′ the opponent's own sample (rejected), each argument
    a tensor of summed sequence log-probabilities, and ℓ = `logistic`. Returns one loss per
    pair; the objective is their mean.

    The official code (uclaml/SPIN, `SPINTrainer.spin_loss`) computes the same quantity as
    −logsigmoid(β·(π_real − π_gen − (ref_real − ref_gen))) with β = λ, and also allows a
    hinge ℓ and a reference-free variant; neither is offered here.
    """
    if lam <= 0:
        raise ValueError(f"SPIN's λ must be > 0, got {lam!r}")
    margin = (policy_chosen - opponent_chosen) - (policy_rejected - opponent_rejected)
    return logistic(lam * margin)


def ideal_update(p_t: Sequence[float], p_data: Sequence[float], lam: float) -> list[float]:
    """Theorem 5.4 (logistic ℓ): the global minimiser of L_SPIN over all distributions,

        p_{t+1}(y) ∝ p_t(y) · (p_data(y) / p_t(y))^(1/λ),

    normalised. λ = 1 jumps to p_data; λ > 1 moves part of the way; 0 < λ < 1 overshoots.
    Responses with p_data(y) = 0 get probability 0 (for any λ > 0)."""
    if lam <= 0:
        raise ValueError(f"SPIN's λ must be > 0, got {lam!r}")
    if len(p_t) != len(p_data):
        raise ValueError(f"p_t has {len(p_t)} responses, p_data {len(p_data)}")
    if any(p <= 0 for p in p_t):
        raise ValueError("p_t must be positive on every response")
    raw = [
        pt * (pd / pt) ** (1.0 / lam) if pd > 0 else 0.0 for pt, pd in zip(p_t, p_data, strict=True)
    ]
    total = sum(raw)
    return [r / total for r in raw]


def log_odds_error(p_t: Sequence[float], p_data: Sequence[float]) -> float:
    """Seed §6.1 on a two-point distribution: d_t = log r_t(y1) − log r_t(y2) with
    r_t = p_t / p_data. Under `ideal_update`, d_{t+1} = (1 − 1/λ)·d_t: λ = 2 halves the
    error each iteration, λ = 1 removes it, 0 < λ < 1 flips its sign (oscillation)."""
    if len(p_t) != 2 or len(p_data) != 2:
        raise ValueError("the log-odds error is defined on two responses")
    return math.log(p_t[0] / p_data[0]) - math.log(p_t[1] / p_data[1])


def merge_pairs(
    by_iteration: Mapping[int, Sequence[dict[str, Any]]], weights: Sequence[float], current: int
) -> list[dict[str, Any]]:
    """The training pairs of iteration `current`: its own pairs and those of earlier
    iterations, the opponent mixture m_t(y′|x) = Σ_j w_j·p_θj(y′|x) of seed §6.1.

    `weights[0]` weighs the current iteration's pairs, `weights[1]` the previous one's, and
    so on; iterations beyond the list are dropped. A weight w keeps round(w·n) of that
    iteration's n pairs (the first ones, in their stored order; a weight above 1 repeats
    them), each pair tagged with the iteration that generated its rejected answer.

    The paper (and `configs/config_iter1.yaml` of the official code) trains iteration t on
    the synthetic data of iterations t and t−1 at weight 1.0 each (100k pairs from 50k
    prompts): ``weights = [1.0, 1.0]`` here. The official dataset mixer takes a fraction of
    a shuffled dataset; here the order is the stored one, so a rerun picks the same pairs.
    """
    if not weights or weights[0] <= 0:
        raise ValueError(f"the current iteration's weight must be > 0, got {list(weights)!r}")
    if any(w < 0 for w in weights):
        raise ValueError(f"pair weights must be >= 0, got {list(weights)!r}")
    merged: list[dict[str, Any]] = []
    for back, weight in enumerate(weights):
        k = current - back
        if k not in by_iteration:
            continue
        pairs = list(by_iteration[k])
        keep = round(weight * len(pairs))
        repeated = (pairs * (keep // len(pairs) + 1))[:keep] if pairs else []
        merged += [{**p, "generated_by": k} for p in repeated]
    return merged


def lambda_for(iteration: int, lambdas: Sequence[float]) -> float:
    """λ (TRL's β) of `iteration` (1-based): ``lambdas[iteration − 1]``, the last value
    repeated once the list runs out.

    The paper uses λ = 0.1 in the early iterations and 5.0 near convergence (its appendix),
    ``[0.1, 0.1, 0.1, 5.0]`` here; the official scripts keep 0.1 for all three published
    iterations (``[0.1]``)."""
    if not lambdas:
        raise ValueError("the λ schedule is empty")
    if iteration < 1:
        raise ValueError(f"iterations count from 1, got {iteration}")
    return float(lambdas[min(iteration, len(lambdas)) - 1])
