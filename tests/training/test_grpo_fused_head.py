"""`score_completions_only`: TRL's fused LM head scores only the labelled positions on CPU,
with the same log-probabilities and gradient as scoring every position, and both as the
naive log-softmax of the full logits."""

import random

import pytest
import torch
from conftest import tiny_llama

from rzero.training.grpo import score_completions_only

VOCAB = 300


def _batch(seed: int):
    """Left-padded prompts then completions of random lengths, labels -100 off the
    completions, as TRL builds them for `_get_per_token_logps_and_entropies`."""
    rng = random.Random(seed)
    rows, prompt_width, completion_width = 5, rng.randint(6, 20), rng.randint(3, 12)
    ids = torch.randint(
        3,
        VOCAB,
        (rows, prompt_width + completion_width),
        generator=torch.Generator().manual_seed(seed),
    )
    attention = torch.ones_like(ids)
    for r in range(rows):
        attention[r, : rng.randint(0, prompt_width - 1)] = 0  # left padding of the prompt
        attention[r, prompt_width + rng.randint(1, completion_width) :] = 0  # ended early
    labels = ids.masked_fill(attention == 0, -100)
    labels[:, :prompt_width] = -100
    return ids, attention, labels


def _fused(model, ids, attention, labels):
    from trl.trainer.utils import add_fused_lm_head

    if not getattr(model, "_fused", False):
        add_fused_lm_head(model, outputs=("log_probs", "entropy"))
        model._fused = True
    model.zero_grad()
    out = model(input_ids=ids, attention_mask=attention, labels=labels, fused_lm_head=True)
    valid = labels[:, 1:] != -100
    (out.log_probs * valid).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.log_probs.detach(), grads


def _naive(model, ids, attention, labels):
    model.zero_grad()
    logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
    targets = labels[:, 1:]
    logp = torch.log_softmax(logits, dim=-1).gather(-1, targets.clamp(min=0)[..., None])[..., 0]
    valid = targets != -100
    (logp * valid).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return logp.detach() * valid, grads


class _Rows:
    """Counts the positions TRL's chunked log-prob function projects."""

    def __enter__(self):
        import trl.trainer.utils as trl_utils

        self.module, self.original = trl_utils, trl_utils._ChunkedLogProbFunction
        self.rows: list[int] = []
        original = self.original

        class Spy:
            @staticmethod
            def apply(hidden, *args):
                self.rows.append(hidden.shape[0])
                return original.apply(hidden, *args)

        trl_utils._ChunkedLogProbFunction = Spy
        return self

    def __exit__(self, *exc):
        self.module._ChunkedLogProbFunction = self.original


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_log_probs_and_gradient_with_fewer_rows(tokenizer, seed):
    model = tiny_llama(tokenizer, seed=seed)
    ids, attention, labels = _batch(seed)
    valid = labels[:, 1:] != -100
    with _Rows() as every:
        full, full_grads = _fused(model, ids, attention, labels)
    with score_completions_only(), _Rows() as kept:
        compact, compact_grads = _fused(model, ids, attention, labels)
    naive, naive_grads = _naive(model, ids, attention, labels)

    assert every.rows == [labels[:, 1:].numel()]  # TRL's CPU default: every position
    assert kept.rows == [int(valid.sum())]  # inside the context: the completion tokens
    torch.testing.assert_close(compact * valid, full * valid, rtol=0, atol=1e-6)
    torch.testing.assert_close(compact * valid, naive, rtol=1e-5, atol=1e-5)
    assert compact_grads.keys() == full_grads.keys() == naive_grads.keys()
    for name, grad in compact_grads.items():
        # float32 sums over the rows in another order: on an AVX-512 CPU (no AMX) one
        # element in 1.5 million differed by 6.6e-6, so the same bound as the naive one
        torch.testing.assert_close(grad, full_grads[name], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(grad, naive_grads[name], rtol=1e-4, atol=1e-5)


def test_the_switch_is_restored(tokenizer):
    import trl.trainer.utils as trl_utils

    before = trl_utils._use_triton
    with score_completions_only():
        assert trl_utils._use_triton(torch.device("cpu")) is True
        assert trl_utils._use_triton(torch.device("meta")) is before(torch.device("meta"))
    assert trl_utils._use_triton is before
    with pytest.raises(RuntimeError), score_completions_only():
        raise RuntimeError("a failed phase")
    assert trl_utils._use_triton is before
