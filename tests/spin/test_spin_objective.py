"""SPIN's objective against its theory (seed 000 §1.3, §6.1) and against TRL's DPO loss.

A categorical "model" (one logit per whole response) is trained with `spin_loss` to
convergence on the exact expectation over y ~ p_data and y′ ~ p_t; its iterates must follow
Theorem 5.4, p_{t+1} ∝ p_t (p_data / p_t)^(1/λ)."""

from __future__ import annotations

import math

import pytest
import torch

from rzero.spin.objective import (
    ideal_update,
    lambda_for,
    log_odds_error,
    logistic,
    merge_pairs,
    spin_loss,
)


def train_to_convergence(p_t: list[float], p_data: list[float], lam: float) -> list[float]:
    """argmin over categorical p_θ of E_{y~p_data, y′~p_t} spin_loss, by L-BFGS on the logits
    (started at p_t, as SPIN starts each iteration at the opponent's weights)."""
    log_pt = torch.tensor(p_t, dtype=torch.float64).log()
    w = torch.outer(
        torch.tensor(p_data, dtype=torch.float64), torch.tensor(p_t, dtype=torch.float64)
    )  # w[a, b] = p_data(a) p_t(b)
    theta = log_pt.clone().requires_grad_(True)
    opt = torch.optim.LBFGS(
        [theta],
        lr=1.0,
        max_iter=500,
        tolerance_grad=1e-12,
        tolerance_change=1e-14,
        line_search_fn="strong_wolfe",
    )

    def closure():
        opt.zero_grad()
        logp = torch.log_softmax(theta, 0)
        k = len(p_t)
        a, b = torch.meshgrid(torch.arange(k), torch.arange(k), indexing="ij")
        loss = (w * spin_loss(logp[a], logp[b], log_pt[a], log_pt[b], lam)).sum()
        loss.backward()
        return loss

    for _ in range(5):
        opt.step(closure)
    return torch.softmax(theta.detach(), 0).tolist()


def test_the_seeds_worked_example():
    # p_data (0.8, 0.2), p_t (0.5, 0.5): λ = 1 lands on p_data, λ = 2 at about (0.667, 0.333)
    assert ideal_update([0.5, 0.5], [0.8, 0.2], 1.0) == pytest.approx([0.8, 0.2])
    assert ideal_update([0.5, 0.5], [0.8, 0.2], 2.0) == pytest.approx([0.667, 0.333], abs=1e-3)
    for lam in (1.0, 2.0):
        trained = train_to_convergence([0.5, 0.5], [0.8, 0.2], lam)
        assert trained == pytest.approx(ideal_update([0.5, 0.5], [0.8, 0.2], lam), abs=1e-4)


@pytest.mark.parametrize("lam", [1.0, 2.0, 0.5])
def test_trained_iterates_follow_theorem_5_4(lam):
    p_data = [0.5, 0.3, 0.15, 0.05]
    p = [0.1, 0.2, 0.3, 0.4]
    for _ in range(4):  # each iteration: the trained model becomes the next opponent
        expected = ideal_update(p, p_data, lam)
        p = train_to_convergence(p, p_data, lam)
        assert p == pytest.approx(expected, abs=2e-4), (lam, p, expected)


def test_the_log_odds_error_shrinks_by_one_minus_one_over_lambda():
    p_data = [0.8, 0.2]
    for lam, factor in ((2.0, 0.5), (1.0, 0.0), (0.5, -1.0), (4.0, 0.75)):
        p = [0.3, 0.7]
        d = log_odds_error(p, p_data)
        for _ in range(3):
            p = train_to_convergence(p, p_data, lam)
            d_next = log_odds_error(p, p_data)
            assert d_next == pytest.approx(factor * d, abs=1e-3), (lam, d, d_next)
            d = d_next
    # 0 < λ < 1 overshoots: the sign of the error flips every iteration (oscillation)
    p, signs = [0.3, 0.7], []
    for _ in range(4):
        p = train_to_convergence(p, p_data, 0.8)
        signs.append(math.copysign(1, log_odds_error(p, p_data)))
    assert signs == [1, -1, 1, -1]


def test_the_data_distribution_is_a_fixed_point():
    # Theorem 5.2: p_t = p_data is the global minimiser for any λ
    for lam in (0.1, 1.0, 5.0):
        assert train_to_convergence([0.6, 0.4], [0.6, 0.4], lam) == pytest.approx(
            [0.6, 0.4], abs=1e-6
        )


def test_spin_loss_is_the_logistic_of_the_scaled_margin():
    g = torch.Generator().manual_seed(0)
    pc, pr, oc, orj = (torch.randn(64, generator=g, dtype=torch.float64) * 20 for _ in range(4))
    lam = 0.37
    margin = (pc - oc) - (pr - orj)
    naive = torch.log1p(torch.exp(-lam * margin))
    assert torch.allclose(spin_loss(pc, pr, oc, orj, lam), naive)
    big = torch.tensor([-1e4, 0.0, 1e4], dtype=torch.float64)
    assert logistic(big).tolist() == pytest.approx([1e4, math.log(2), 0.0])
    with pytest.raises(ValueError, match="λ must be > 0"):
        spin_loss(pc, pr, oc, orj, 0.0)


def test_merge_pairs_keeps_each_iteration_at_its_weight():
    by_it = {1: [{"id": f"a{i}"} for i in range(4)], 2: [{"id": f"b{i}"} for i in range(4)]}
    merged = merge_pairs(by_it, [1.0, 0.5], current=2)
    assert [p["id"] for p in merged] == ["b0", "b1", "b2", "b3", "a0", "a1"]
    assert [p["generated_by"] for p in merged] == [2] * 4 + [1] * 2
    assert [p["id"] for p in merge_pairs(by_it, [1.0], 2)] == ["b0", "b1", "b2", "b3"]
    assert len(merge_pairs(by_it, [1.0, 1.0], 1)) == 4  # no iteration 0 pairs
    assert len(merge_pairs(by_it, [1.5], 2)) == 6  # a weight above 1 repeats pairs
    with pytest.raises(ValueError, match="current iteration's weight"):
        merge_pairs(by_it, [0.0, 1.0], 2)


def test_lambda_schedule():
    paper = [0.1, 0.1, 0.1, 5.0]
    assert [lambda_for(k, paper) for k in (1, 2, 3, 4, 6)] == [0.1, 0.1, 0.1, 5.0, 5.0]
    assert lambda_for(3, [0.1]) == 0.1
    with pytest.raises(ValueError, match="from 1"):
        lambda_for(0, paper)


def test_the_dynamics_read_accuracy_margin_loglik_and_warn_on_stall_and_drift():
    from rzero.spin.dynamics import drift_warning, heldout_dynamics, loglik_change, stall_warning

    rows = [
        {
            "id": str(i),
            "policy_chosen": -10.0 + d,
            "policy_rejected": -20.0,
            "opponent_chosen": -10.0,
            "opponent_rejected": -20.0,
            "chosen_tokens": 10,
            "disc_chosen": -5.0,
            "disc_rejected": -30.0,
        }
        for i, d in enumerate([1, 2, -1, 3])
    ]
    dyn = heldout_dynamics(rows, lam=0.5)
    assert (dyn["main"]["right"], dyn["main"]["n"]) == (3, 4)
    assert dyn["main"]["margin"] == pytest.approx(1.25)
    assert dyn["loss"] == pytest.approx(float(logistic(0.5 * torch.tensor([1.0, 2, -1, 3])).mean()))
    assert dyn["loglik"]["per_token"] == pytest.approx(-0.875)  # (-9 - 8 - 11 - 7) / 40
    assert dyn["discriminator"]["accuracy"] == 1.0
    assert stall_warning(dyn, 2) is None  # 75 % is not near chance
    near = heldout_dynamics([{**r, "policy_chosen": -10.0} for r in rows], lam=0.5)
    assert "the stall is the optimiser's" in stall_warning(near, 2)
    earlier = [{**r, "policy_chosen": r["policy_chosen"] + 5.0} for r in rows]
    change = loglik_change(earlier, rows)
    assert change["delta"] == pytest.approx(-0.5) and change["n"] == 4
    assert "moved away from p_data" in drift_warning(change, 2)
    assert drift_warning(loglik_change(rows, earlier), 2) is None


def test_an_identical_pair_gives_no_gradient_and_mostly_identical_pairs_are_said():
    from rzero.spin.dynamics import fixed_point_warning
    from rzero.spin.objective import spin_loss

    # y′ = y: log pθ(y) and log pθ(y′) are one number, so the loss's pulls on it cancel
    logp = torch.tensor([-7.0, -3.5], requires_grad=True)
    opponent = torch.tensor([-6.0, -4.0])
    loss = spin_loss(logp, logp, opponent, opponent, 0.1).sum()
    loss.backward()
    assert torch.equal(logp.grad, torch.zeros(2))
    assert float(loss) == pytest.approx(2 * math.log(2))
    assert fixed_point_warning(31, 64, 1) is None
    said = fixed_point_warning(63, 64, 1)
    assert said.startswith("iteration 1: the opponent wrote the data answer word for word")
    assert "63 of 64 training prompts" in said and "from the other 1 only" in said
    assert fixed_point_warning(0, 0, 1) is None
