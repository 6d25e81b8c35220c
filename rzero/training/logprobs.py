"""GRPO's per-token log-probabilities on CPU: the prompts' shared prefix run once, and the
completion positions scored with one log-softmax over the vocabulary.

TRL computes them (`GRPOTrainer._get_per_token_logps_and_entropies`) by running every
sequence of a micro-batch in full through its fused LM head. Two things make that slow on a
CPU, and `completion_logps` does both differently, with the same numbers:

- **The shared prefix.** Every prompt of a solver's GRPO update starts with the same tokens:
  the chat template, the system line and the few-shot examples (about 125 of the 140 tokens
  of the default solver prompt); only the question and the completion differ. Here the
  prefix runs once as one row, its keys and values are expanded (not copied) to the B rows,
  and each row's remainder (the rest of its prompt, its completion) runs against them. A
  causal prefix does not see what follows it, so its hidden states, keys and values are the
  same in every row, and autograd sums the B rows' gradients through the expansion as it
  sums the B copies'. Positions: TRL's forward gives a left-padded row the positions pad_i,
  pad_i + 1, ...; here the prefix has 0 .. P − 1 and each remainder continues at P whatever
  its own left padding, so within each row every pair of tokens keeps its distance, and
  rotary attention depends on distance only.
- **The head.** TRL's fused head (`trl.kernels.ChunkedLogProbFunction`) tiles the
  vocabulary so GPU memory never holds the logits, and folds each tile in several torch
  passes where Triton is missing: on a CPU its backward alone took 1.3 s of a micro-batch of
  8 completions. Here the completion positions' logits are formed at once
  ([completion tokens, vocabulary]: 100 MB for 512 tokens of a 49k vocabulary, which a CPU
  holds) and go through one float32 log-softmax, as `logits / temperature` (TRL's
  temperature), with the entropy −Σ p log p where asked.
- **The padding.** TRL pads every completion to the longest of the whole rollout; the
  columns after the longest completion of a micro-batch are cut before the forward (their
  log-probabilities are 0, as TRL's masked ones are).

What differs from TRL's forward is float rounding (`tests/training/test_grpo_logprobs.py` checks
log-probabilities, entropies, loss and gradients against it on random inputs, and one GRPO
update's logged loss and gradient norm through `train_grpo`).
"""

from __future__ import annotations

import torch

# below this many shared tokens the prefix is not split off (a second forward call)
MIN_SHARED = 16


def supports_cpu_logps(model) -> bool:
    """A plain (not PEFT- or engine-wrapped) decoder whose every layer attends over the full
    cache, with no logit scaling or soft-capping, on CPU: the models `rzero.generation.decoding`
    samples (Llama, Qwen2/3 without a sliding window)."""
    from transformers import PreTrainedModel

    from rzero.generation.decoding import supports_decode

    if not isinstance(model, PreTrainedModel):  # a DeepSpeed engine, DDP, ...
        return False
    if getattr(model, "peft_config", None) or not hasattr(model, model.base_model_prefix):
        return False
    text = model.config.get_text_config()
    if any(
        getattr(text, key, None) is not None
        for key in (
            "final_logit_softcapping",
            "logit_scale",
            "output_multiplier",
            "lm_head_multiplier",
            "logits_scaling",
        )
    ):
        return False
    return supports_decode(model)


def shared_prefix_length(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_width: int
) -> int:
    """The number of leading prompt tokens all rows share, each row read from its first
    unmasked token (prompts are left-padded), leaving every row at least one prompt token
    of its own (the position whose output scores the first completion token).

    input_ids, attention_mask: [B, W + completion_width], the prompt part W left-padded.
    """
    prompt_ids = input_ids[:, : input_ids.size(1) - completion_width]  # [B, W]
    prompt_mask = attention_mask[:, : prompt_ids.size(1)]  # [B, W]
    lengths = prompt_mask.sum(dim=1)  # [B]
    shortest = int(lengths.min())
    if shortest <= 1:
        return 0
    width = prompt_ids.size(1)
    # row i's prompt occupies columns width - lengths[i] .. width - 1
    starts = width - lengths  # [B]
    cols = starts[:, None] + torch.arange(shortest - 1)[None, :]  # [B, shortest - 1]
    heads = prompt_ids.gather(1, cols)  # [B, shortest - 1]: each row's first tokens
    same = (heads == heads[:1]).all(dim=0)  # [shortest - 1]
    differs = (~same).nonzero()
    return int(differs[0]) if len(differs) else shortest - 1


def _expanded_cache(prefix_cache, rows: int):
    """A DynamicCache holding `prefix_cache`'s keys and values expanded to `rows` rows (views:
    the next forward's concatenation copies them, and their gradient sums over the rows)."""
    from transformers.cache_utils import DynamicCache

    cache = DynamicCache()
    for index, layer in enumerate(prefix_cache.layers):
        cache.update(
            layer.keys.expand(rows, -1, -1, -1), layer.values.expand(rows, -1, -1, -1), index
        )
    return cache


def _completion_hidden(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_width: int, prefix: int
) -> torch.Tensor:
    """[B, C, H]: the backbone's output at the positions that predict the last
    `completion_width` tokens, with the first `prefix` prompt tokens run once (0: not
    split)."""
    backbone = getattr(model, model.base_model_prefix)
    if prefix == 0:
        out = backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return out.last_hidden_state[:, -completion_width - 1 : -1]
    rows, total = input_ids.shape
    width = total - completion_width
    lengths = attention_mask[:, :width].sum(dim=1)  # [B] prompt tokens per row
    starts = width - lengths  # [B] first prompt column of each row
    rest = lengths - prefix  # [B] prompt tokens after the shared prefix (>= 1)
    rest_width = int(rest.max())
    # the shared prefix, once: row 0's first `prefix` prompt tokens
    first = int(starts[0])
    prefix_out = backbone(input_ids=input_ids[:1, first : first + prefix], use_cache=True)
    cache = _expanded_cache(prefix_out.cache, rows)
    # each row's remainder, left-padded to rest_width, then the completion as it was
    suffix_width = rest_width + completion_width
    cols = torch.arange(suffix_width)[None, :]  # [1, S]
    offset = rest_width - rest  # [B] left padding of the remainder
    source = (starts + prefix - offset)[:, None] + cols  # [B, S] column in input_ids
    in_rest = cols >= offset[:, None]  # [B, S]; the completion part is always True
    source = torch.where(in_rest, source, torch.zeros_like(source)).clamp(max=total - 1)
    ids = input_ids.gather(1, source)  # [B, S]
    mask = attention_mask.gather(1, source) * in_rest  # [B, S]
    positions = (prefix + (cols - offset[:, None])).clamp(min=prefix)  # [B, S]
    full_mask = torch.cat([attention_mask.new_ones(rows, prefix), mask], dim=1)  # [B, P + S]
    out = backbone(
        input_ids=ids.masked_fill(mask == 0, 0),
        attention_mask=full_mask,
        position_ids=positions,
        cache=cache,
        use_cache=False,
    )
    return out.last_hidden_state[:, -completion_width - 1 : -1]


def completion_logps(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    completion_width: int,
    *,
    temperature: float = 1.0,
    compute_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(log p(token | earlier tokens), entropy of that distribution or None), each [B, C]
    over the last C = `completion_width` columns of `input_ids` ([B, W + C], prompts
    left-padded, completions right-padded; 0 where `attention_mask` is 0), from
    `logits / temperature`: the numbers of TRL's `_get_per_token_logps_and_entropies`."""
    # the completion columns after every row's last token are padding in all rows: cut
    columns = attention_mask[:, -completion_width:]  # [B, C]
    used = int(columns.any(dim=0).nonzero().max()) + 1 if columns.any() else 1
    cut = completion_width - used
    if cut:
        input_ids, attention_mask = input_ids[:, :-cut], attention_mask[:, :-cut]
    prefix = shared_prefix_length(input_ids, attention_mask, used)
    hidden = _completion_hidden(
        model, input_ids, attention_mask, used, prefix if prefix >= MIN_SHARED else 0
    )  # [B, C', H]
    targets = input_ids[:, -used:]  # [B, C']
    mask = attention_mask[:, -used:].bool()  # [B, C']
    logits = model.get_output_embeddings()(hidden[mask]).float()  # [n, V]
    if temperature != 1.0:
        logits = logits / temperature
    logp_all = torch.log_softmax(logits, dim=-1)  # [n, V]
    logps = logp_all.gather(1, targets[mask][:, None]).squeeze(1)  # [n]
    shape = (mask.size(0), completion_width)
    full = torch.nn.functional.pad(mask, (0, cut))  # [B, C]
    out = hidden.new_zeros(shape, dtype=torch.float32).masked_scatter(full, logps)
    entropy = None
    if compute_entropy:
        ent = -(logp_all.exp() * logp_all).sum(dim=-1)  # [n]
        entropy = out.new_zeros(shape).masked_scatter(full, ent)
    return out, entropy
