"""`rzero.generation.sampling.next_tokens` against transformers' sampler (the naive reference).

The reference is transformers' own warpers: TemperatureLogitsWarper -> TopKLogitsWarper ->
TopPLogitsWarper -> softmax. The kept set is compared token by token; the distribution by a
chi-square test of many seeded draws against the reference probabilities.
"""

from __future__ import annotations

import pytest
import torch
from scipy.stats import chisquare
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from rzero.generation.sampling import in_top_p, next_tokens, top_k_candidates

SETTINGS = [  # (temperature, top_k, top_p)
    (1.0, 40, 1.0),
    (0.7, 40, 0.9),
    (1.3, 5, 0.5),
    (1.0, 0, 0.95),
    (0.6, 0, 0.8),
    (1.0, 0, 1.0),
    (1.0, 300, 0.9),  # k above MAX_CANDIDATES: the full-vocabulary path
]


def reference_scores(logits, temperature, top_k, top_p):
    warpers = LogitsProcessorList([TemperatureLogitsWarper(temperature)])
    if top_k > 0:
        warpers.append(TopKLogitsWarper(top_k))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    return warpers(None, logits.clone())


def full_path_kept(logits, temperature, top_k, top_p):
    """The full-vocabulary path's kept set [B, V]: its top-k threshold, then `in_top_p`
    asked for every token."""
    scores = logits / temperature
    if top_k > 0:
        scores = scores.masked_fill(scores < scores.topk(top_k).values[:, -1:], float("-inf"))
    kept = torch.isfinite(scores)
    if top_p < 1.0:
        probs = scores.softmax(-1)
        for t in range(logits.shape[1]):
            kept[:, t] &= in_top_p(scores, probs, torch.full((logits.shape[0],), t), top_p)
    return kept


def fast_kept(logits, temperature, top_k, top_p):
    """The kept set [B, V] of `next_tokens`: the candidates' on the top-k path, the full
    path's for the rows that spill (more ties with the k-th logit than the slack holds)."""
    if not 0 < top_k <= 256:
        return full_path_kept(logits, temperature, top_k, top_p)
    ids, _, kept, spill = top_k_candidates(logits, temperature, top_k, top_p)
    out = torch.zeros_like(logits, dtype=torch.bool).scatter(1, ids, kept)
    if spill.any():
        out[spill] = full_path_kept(logits[spill], temperature, top_k, top_p)
    return out


@pytest.mark.parametrize("temperature,top_k,top_p", SETTINGS)
def test_kept_set_is_transformers_kept_set(temperature, top_k, top_p):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 400, generator=g) * 3  # [B, V]
    expected = torch.isfinite(reference_scores(logits, temperature, top_k, top_p))
    assert torch.equal(fast_kept(logits, temperature, top_k, top_p), expected)


def test_top_k_keeps_every_token_tied_with_the_kth():
    # logits on a coarse grid (as bf16 logits are): many ties at the 40th value
    g = torch.Generator().manual_seed(1)
    logits = torch.randint(0, 60, (8, 400), generator=g).float() / 4  # [B, V]
    expected = torch.isfinite(reference_scores(logits, 1.0, 40, 1.0))
    ids, _, kept, spill = top_k_candidates(logits, 1.0, 40, 1.0)
    assert not spill.any()  # every tie run fits in the slack: the top-k path decides alone
    kept = torch.zeros_like(expected).scatter(1, ids, kept)
    assert torch.equal(kept, expected)
    assert (kept.sum(-1) > 40).any()  # ties made some row keep more than k


def test_top_p_with_ties_keeps_as_many_tokens_of_the_same_values():
    # transformers' sort is not stable: which of several tied tokens at the top-p boundary
    # survive is arbitrary there, so the kept logit values (a multiset) are compared
    g = torch.Generator().manual_seed(2)
    logits = torch.randint(0, 8, (8, 400), generator=g).float()  # [B, V], ~50 ties a value
    for top_k, top_p in [(0, 0.9), (0, 0.5), (60, 0.7)]:
        expected = torch.isfinite(reference_scores(logits, 1.0, top_k, top_p))
        kept = fast_kept(logits, 1.0, top_k, top_p)
        for row in range(logits.shape[0]):
            assert sorted(logits[row][kept[row]].tolist()) == sorted(
                logits[row][expected[row]].tolist()
            )


def test_top_p_boundary_exactly_on_a_cumulative_sum():
    # 512 equal logits: each token has probability 1/512 exactly, so cumulative sums are
    # exact; top_p 0.5 drops the 256 tokens whose ascending cumulative sum is <= 0.5
    logits = torch.zeros(2, 512)
    expected = torch.isfinite(reference_scores(logits, 1.0, 0, 0.5))
    kept = fast_kept(logits, 1.0, 0, 0.5)
    assert expected.sum(-1).tolist() == [256, 256]
    assert kept.sum(-1).tolist() == [256, 256]


@pytest.mark.parametrize("top_p", [1e-9, 0.05])
def test_top_p_below_the_top_probability_keeps_the_top_token_only(top_p):
    logits = torch.zeros(3, 300)
    logits[:, 7] = 5.0  # p = e^5 / (e^5 + 299) = 0.33 > top_p
    for top_k in (0, 40):
        expected = torch.isfinite(reference_scores(logits, 1.0, top_k, top_p))
        kept = fast_kept(logits, 1.0, top_k, top_p)
        assert torch.equal(kept, expected)
        assert kept.sum().item() == 3 and kept[:, 7].all()


def test_greedy_is_argmax_with_the_first_of_tied_maxima():
    logits = torch.tensor([[0.0, 2.0, 2.0, 1.0], [3.0, 3.0, 3.0, 3.0]])
    assert next_tokens(logits, 0.0).tolist() == [1, 0]


@pytest.mark.parametrize("temperature,top_k,top_p", SETTINGS)
def test_draws_follow_the_transformers_distribution(temperature, top_k, top_p):
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(3, 400, generator=g) * 2.5  # [R, V]
    draws = 20000
    probs = reference_scores(logits, temperature, top_k, top_p).softmax(-1)  # [R, V]
    tokens = next_tokens(
        logits.repeat_interleave(draws, 0),
        temperature,
        top_k,
        top_p,
        torch.Generator().manual_seed(4),
    ).view(3, draws)
    for row in range(3):
        counts = torch.bincount(tokens[row], minlength=400).double()
        assert counts[probs[row] == 0].sum() == 0  # never a removed token
        # chi-square over tokens expected >= 5 times, the rest pooled into one bin
        expected = probs[row].double() * draws
        big = expected >= 5
        obs = torch.cat([counts[big], counts[~big].sum()[None]])
        exp = torch.cat([expected[big], expected[~big].sum()[None]])
        if exp[-1] < 5:  # too little mass to pool: fold it into the largest bin
            obs[obs.argmax()] += obs[-1]
            exp[exp.argmax()] += exp[-1]
            obs, exp = obs[:-1], exp[:-1]
        if len(obs) == 1:  # one kept token: every draw is it
            assert obs[0] == draws
            continue
        exp *= obs.sum() / exp.sum()
        p_value = chisquare(obs.numpy(), exp.numpy()).pvalue
        # 7 settings x 3 rows: a false alarm at 1e-4 has odds ~0.2 %
        assert p_value > 1e-4, (row, p_value)
