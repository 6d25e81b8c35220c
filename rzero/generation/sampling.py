"""The next token: greedy, or sampled with temperature, top-k and top-p.

The distribution is transformers' (`TemperatureLogitsWarper` -> `TopKLogitsWarper` ->
`TopPLogitsWarper` -> softmax -> `torch.multinomial`), at a fraction of its cost on CPU.
transformers draws one exponential random number per vocabulary entry (`multinomial`), and
its top-p warper sorts the whole vocabulary; at batch 128 x 49,152 entries that is about
120 ms and 340 ms a step on a 2-core CPU, more than the model itself. Here:

- with top-k (k <= `MAX_CANDIDATES`): `topk` gives the candidates, top-p is applied among
  them exactly as transformers applies it to the masked vocabulary, and one draw per row is
  made among the kept candidates;
- without top-k: one float64 cumulative sum and one uniform number per row (inverse CDF);
  top-p is then applied by rejection: a draw outside the top-p set is redrawn, which samples
  the renormalised top-p set exactly, and at least `top_p` of the mass is accepted each time.

Ties are kept as transformers keeps them: every token tied with the k-th logit survives
top-k (ties are common with bf16 logits). Among tokens tied at the top-p boundary
transformers' unstable sort keeps arbitrary ones; here the order is (logit desc, id asc).
"""

from __future__ import annotations

import torch

# top-k larger than this goes through the full-vocabulary path (topk gets slow past ~256)
MAX_CANDIDATES = 256
# extra candidates beyond k, so a run of tokens tied with the k-th logit is usually complete
TIE_SLACK = 16


def next_tokens(
    logits: torch.Tensor,
    temperature: float,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Next token of each row of `logits` [batch, vocab] (float32): [batch] token ids.

    temperature 0 is greedy (the first maximum, as `argmax`); top_k 0 and top_p 1 disable
    those filters.
    """
    if temperature == 0:
        return logits.argmax(-1)
    vocab = logits.shape[-1]
    if 0 < top_k <= MAX_CANDIDATES and top_k + TIE_SLACK <= vocab:
        return _sample_top_k(logits, temperature, top_k, top_p, generator)
    return _sample_full(logits, temperature, top_k, top_p, generator)


def top_k_candidates(logits: torch.Tensor, temperature: float, top_k: int, top_p: float):
    """The candidates of the top-k path: (ids [batch, C], scaled logits [batch, C], kept
    [batch, C] bool, spill [batch] bool), in (logit desc, id asc) order. A `spill` row has
    more tokens tied with its k-th logit than the candidates hold: its kept set is unknown
    here and it must be sampled over the full vocabulary."""
    scores, ids = logits.topk(top_k + TIE_SLACK, dim=-1)  # [B, C], descending
    scores = scores / temperature  # monotone: the same top tokens as transformers' order
    # a fixed order among ties: ids ascending, then a stable sort by logit
    by_id = ids.argsort(dim=-1)
    ids, scores = ids.gather(1, by_id), scores.gather(1, by_id)
    order = scores.argsort(dim=-1, descending=True, stable=True)
    ids, scores = ids.gather(1, order), scores.gather(1, order)
    kth = scores[:, top_k - 1 : top_k]  # [B, 1]
    kept = scores >= kth  # transformers keeps every token tied with the k-th
    spill = kept[:, -1].clone()  # [B]; kept is narrowed by top-p below
    if top_p < 1.0:
        kept &= _top_p_among(scores, kept, top_p)
    return ids, scores, kept, spill


def _top_p_among(scores: torch.Tensor, kept: torch.Tensor, top_p: float) -> torch.Tensor:
    """transformers' top-p rule on candidates sorted by (logit desc, id asc): drop a token
    when the probability of it and everything below it is <= 1 - top_p; keep the first."""
    probs = scores.masked_fill(~kept, float("-inf")).softmax(-1)  # [B, C]
    # cumulative probability from the bottom, as transformers sums its ascending sort
    from_bottom = probs.flip(-1).cumsum(-1).flip(-1)
    keep = from_bottom > 1 - top_p
    keep[:, 0] = True
    return keep


def _sample_top_k(logits, temperature, top_k, top_p, generator) -> torch.Tensor:
    ids, scores, kept, spill = top_k_candidates(logits, temperature, top_k, top_p)
    probs = scores.masked_fill(~kept, float("-inf")).softmax(-1)  # [B, C]
    choice = torch.multinomial(probs, 1, generator=generator)  # [B, 1]
    tokens = ids.gather(1, choice).squeeze(1)  # [B]
    if spill.any():
        tokens[spill] = _sample_full(logits[spill], temperature, top_k, top_p, generator)
    return tokens


def _sample_full(logits, temperature, top_k, top_p, generator) -> torch.Tensor:
    scores = logits / temperature  # [B, V]
    if top_k > 0:
        kth = scores.topk(min(top_k, scores.shape[-1]), dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = scores.softmax(-1)  # [B, V]
    cdf = probs.double().cumsum(-1)  # [B, V]
    tokens = _inverse_cdf(cdf, generator)
    if top_p < 1.0:
        pending = ~in_top_p(scores, probs, tokens, top_p)
        while pending.any():
            rows = pending.nonzero().squeeze(1)
            tokens[rows] = _inverse_cdf(cdf[rows], generator)
            pending[rows] = ~in_top_p(scores[rows], probs[rows], tokens[rows], top_p)
    return tokens


def _inverse_cdf(cdf: torch.Tensor, generator) -> torch.Tensor:
    """One draw per row from the distribution whose cumulative sum is `cdf` [B, V] (float64:
    float32 would round tokens below ~1e-7 probability to zero or to one ulp)."""
    u = (
        torch.rand(cdf.shape[0], 1, dtype=cdf.dtype, device=cdf.device, generator=generator)
        * cdf[:, -1:]
    )  # [B, 1], in [0, total)
    # the first index whose cumulative sum exceeds u; a zero-probability token never is
    return torch.searchsorted(cdf, u, right=True).squeeze(1).clamp_(max=cdf.shape[1] - 1)


def in_top_p(
    scores: torch.Tensor, probs: torch.Tensor, tokens: torch.Tensor, top_p: float
) -> torch.Tensor:
    """Whether each row's token [B] survives transformers' top-p warper on `scores` [B, V]
    (probs = softmax(scores)): the probability of the token and of all tokens below it in
    (logit desc, id asc) order must exceed 1 - top_p; the first token always survives."""
    own = scores.gather(1, tokens[:, None])  # [B, 1]
    ids = torch.arange(scores.shape[1], device=scores.device)
    at_or_below = (scores < own) | ((scores == own) & (ids >= tokens[:, None]))  # [B, V]
    mass = (probs * at_or_below).sum(-1)  # [B]
    return (mass > 1 - top_p) | at_or_below.all(-1)
