"""SPAG's formulas (Cheng et al. 2024, §4; seed 000 §2.1), each one named function; the
training phase (`rzero.spag.train`) calls them.

    turn_rewards      which turns of which episodes are trained on, with what reward and
                      role weight (the winner's turns, discounted toward the start, the two
                      roles balanced)
    sequence_logprob  a turn's mean token log-probability, the policy's score of a turn
    spag_loss         the offline self-play loss: a clipped importance-weighted advantage with
                      a KL penalty on the game turns, plus α times an SFT loss on
                      instruction data
    imitation_loss    the imitation step on a teacher's games: the winner's turns' likelihood
                      with a KL penalty toward the base model
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rzero.spag.game import ATTACKER, ATTACKER_WINS, DEFENDER, DEFENDER_WINS


def turn_rewards(episodes: Sequence[dict[str, Any]], decay: float = 0.8) -> list[dict[str, Any]]:
    """The training rows of a batch of episodes: one per turn of the winner, with its reward
    and role weight. Ties and violations give no rows.

    In an episode the winner made turns t = 1..T (T its last); turn t gets the reward
    r_t = γ^(−t) / Σ_s γ^(−s) with γ = `decay`, so the turns sum to the win's reward 1 and
    a turn's share shrinks by γ per turn away from the end (the last turn, which decided the
    game, weighs most). With G_A attacker wins and G_D defender wins among G = G_A + G_D
    decided games, every attacker row gets the weight G / (2 G_A) and every defender row
    G / (2 G_D), so each role carries half of the loss in expectation whichever wins more.

    As the official code (tools/assign_rewards.py, `compute_self_play_sample_rewards`):
    the same reward, normalisation and weights; there the query of each row is rendered with
    a randomly drawn template, here with the role's one prompt (`play.role_prompt`).
    """
    if not 0 < decay <= 1:
        raise ValueError(f"decay {decay!r}: expected 0 < decay <= 1")
    decided = [e for e in episodes if e["outcome"] in (ATTACKER_WINS, DEFENDER_WINS)]
    wins = {
        ATTACKER: sum(e["outcome"] == ATTACKER_WINS for e in decided),
        DEFENDER: sum(e["outcome"] == DEFENDER_WINS for e in decided),
    }
    weight = {r: len(decided) / (2 * n) if n else 0.0 for r, n in wins.items()}
    rows = []
    for e in decided:
        winner = ATTACKER if e["outcome"] == ATTACKER_WINS else DEFENDER
        turns = e["turns"][: e["messages"]]
        mine = [i for i, t in enumerate(turns) if t["role"] == winner]
        coeffs = [decay ** -(n + 1) for n in range(len(mine))]
        total = sum(coeffs)
        rows += [
            {
                "episode": e["id"],
                "target": e["target"],
                "role": winner,
                "index": i,
                "history": [(t["role"], t["text"]) for t in turns[:i]],
                "response": turns[i]["text"],
                "reward": c / total,
                "weight": weight[winner],
            }
            for i, c in zip(mine, coeffs, strict=True)
        ]
    return rows


def sequence_logprob(token_logprobs, mask):
    """log π(y|x) / |y|: the mean over a turn's tokens (mask 1) of their log-probabilities,
    per row. The official code scores a turn the same way (`compute_lm_loglikeli`), so the
    importance ratio below is a ratio of per-token geometric means, not of sequence
    probabilities."""
    return (token_logprobs * mask).sum(-1) / mask.sum(-1).clamp(min=1)


def spag_loss(
    logp,
    old_logp,
    reward,
    weight,
    is_sft,
    *,
    clip: float = 0.2,
    kl_coef: float = 0.2,
    sft_coef: float = 0.5,
):
    """The offline self-play loss of one batch (rows: game turns and SFT rows, `is_sft`).

    On game turns, with ρ = exp(log π_θ − log π_old) (`sequence_logprob` of the turn under
    the policy being trained and under the copy that collected it) and the advantage
    A = r − β (log π_θ − log π_old):

        L_game = − Σ_game w · min(A ρ, A clip(ρ, 1 − ε, 1 + ε)) / N_game

    and on instruction rows L_sft = − Σ_sft w · log π_θ / N_sft; the loss is
    L_game + α L_sft with ε = `clip`, β = `kl_coef`, α = `sft_coef` (paper: ε 0.2, β 0.2,
    α 0.5). A batch without game rows or without SFT rows leaves that term out.

    As the official code (trainers.py, `OfflineWeightedPolicyTrainer.compute_loss`),
    including the two of its choices a reader may not expect: the KL term sits inside the
    advantage and is not detached, so it is differentiated both through A and through ρ;
    and the collecting policy is the start-of-epoch model, so ρ = 1 at the first step. At
    ρ = 1 the gradient of a game row is therefore −w (r − β) ∇ log π / N_game, not
    −w r ∇ log π: a winner's turn whose reward is below β is pushed down at the first step
    (with decay 0.8 and five winning turns the first three get r = 0.12, 0.15, 0.19 < 0.2).
    """
    import torch

    game = 1.0 - is_sft.float()
    sft = is_sft.float()
    kl = logp - old_logp
    ratio = torch.exp(logp - old_logp)
    advantage = reward - kl_coef * kl
    surrogate = -torch.minimum(
        advantage * ratio, advantage * torch.clamp(ratio, 1 - clip, 1 + clip)
    )
    n_game, n_sft = game.sum(), sft.sum()
    loss = logp.new_zeros(())
    if n_game > 0:
        loss = loss + (surrogate * game * weight).sum() / n_game
    if n_sft > 0:
        loss = loss + sft_coef * (-logp * sft * weight).sum() / n_sft
    return loss


def imitation_loss(logp, ref_logp, weight, *, kl_coef: float = 0.1):
    """Imitation of a teacher's games: on each winner turn of the teacher's episodes
    (`turn_rewards` weights), −log π_θ + β · π_θ (log π_θ − log π_ref), the likelihood of
    the winner's action with a sampled KL penalty toward the base model π_ref, averaged with
    the row weights. As the official code (trainers.py, `SFTWeightedWithKLTrainer`), whose
    KL estimate is the same exp(logp)·(logp − ref_logp) on mean token log-probabilities."""
    import torch

    kl = torch.exp(logp) * (logp - ref_logp)
    return ((-logp + kl_coef * kl) * weight).mean()
