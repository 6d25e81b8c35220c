"""A compact decode loop for in-process generation on CPU, and its seam into TRL's rollouts.

`decode` runs the model's own forward (`model(ids, cache=..., position_ids=..., mask)`) and
differs from `model.generate` where the profile of a CPU step said time went:

- the KV cache is allocated once per batch (`PreallocatedCache`): each step writes its key and
  value in place instead of `torch.cat`-ing the whole cache (a copy that grows every step);
- the next token comes from `rzero.sampling.next_tokens`, which draws from the kept tokens
  only instead of one random number per vocabulary entry;
- a row stops at EOS, at a stop string or after its boxed answer, and finished rows leave the
  batch: the cache is compacted once a quarter of the rows are done, so no step is spent
  padding a finished sequence for long;
- the samples of one prompt share its prefill, and `length_sorted_batches` keeps left
  padding small.

`rollouts_through_decode` puts the loop behind `model.generate` for TRL's GRPOTrainer (which
calls `unwrapped_model.generate(input_ids=, attention_mask=, generation_config=)`), the way
transformers itself installs a `custom_generate`; a configuration the loop does not cover
falls through to transformers' `generate`.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from rzero.generation import cut_at_stop, first_box_end
from rzero.sampling import next_tokens

# compact the batch when this share of its rows has finished (a compaction copies the cache
# once, about one step's worth of time; a finished row costs 1/batch of every step)
COMPACT_SHARE = 0.25


def supports_decode(model) -> bool:
    """A model on CPU (the only place the loop is measured; GPUs sample with vLLM) of a
    decoder-only architecture whose layers all attend over the full cache (no sliding
    window), so the 4-D mask built here is the whole story."""
    config = model.config
    if model.device.type != "cpu":
        return False
    if config.model_type == "llama":
        return True
    return config.model_type in ("qwen2", "qwen3") and set(config.layer_types) == {
        "full_attention"}


# ---------------------------------------------------------------- the cache


class PreallocatedLayer(CacheLayerMixin):
    """One layer's keys and values in [batch, kv_heads, capacity, head_dim] buffers; `update`
    writes in place and returns views of the filled part."""

    is_sliding = False

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity = capacity
        self.length = 0

    def lazy_initialization(self, key_states, value_states) -> None:
        batch, heads, _, dim = key_states.shape
        self.k_buf = key_states.new_empty(batch, heads, self.capacity, dim)
        self.v_buf = value_states.new_empty(batch, heads, self.capacity, dim)
        self.device = key_states.device
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start, end = self.length, self.length + key_states.shape[-2]
        self.k_buf[:, :, start:end] = key_states
        self.v_buf[:, :, start:end] = value_states
        self.length = end
        self.keys, self.values = self.k_buf[:, :, :end], self.v_buf[:, :, :end]
        return self.keys, self.values

    def select_rows(self, rows: torch.Tensor) -> None:
        """Make row i of the batch the old row rows[i]: fewer rows (ascending) to compact in
        place, more rows to share one prompt's cache among its samples."""
        n, end = len(rows), self.length
        if n <= self.k_buf.shape[0]:
            k_buf, v_buf = self.k_buf, self.v_buf
        else:
            k_buf = self.k_buf.new_empty((n, *self.k_buf.shape[1:]))
            v_buf = self.v_buf.new_empty((n, *self.v_buf.shape[1:]))
        k_buf[:n, :, :end] = self.k_buf[rows, :, :end]
        v_buf[:n, :, :end] = self.v_buf[rows, :, :end]
        self.k_buf, self.v_buf = k_buf[:n], v_buf[:n]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return self.capacity


class PreallocatedCache(Cache):
    def __init__(self, num_layers: int, capacity: int):
        super().__init__(layers=[PreallocatedLayer(capacity) for _ in range(num_layers)])

    def select_rows(self, rows: torch.Tensor) -> None:
        for layer in self.layers:
            layer.select_rows(rows)


# ---------------------------------------------------------------- stopping


class StopCheck:
    """Where a completion ends besides EOS: after any of `stops`, or (`boxed`) once its first
    `\\boxed{…}` is closed. Only a token whose text holds a stop's last character can complete
    one, so the text is decoded for those rows only."""

    def __init__(self, tokenizer, stops: Sequence[str] = (), boxed: bool = False):
        self.tokenizer = tokenizer
        self.stops = tuple(stops)
        self.boxed = boxed
        self.window = max((len(s) for s in self.stops), default=0) + 8  # tokens >= 1 char
        last = {s[-1] for s in self.stops} | ({"}"} if boxed else set())
        texts = token_texts(tokenizer)
        # "\ufffd": a token holding part of a multi-byte character may complete it
        self.triggers = frozenset(i for i, t in enumerate(texts)
                                  if "\ufffd" in t or any(c in t for c in last))

    def ends(self, ids: list[int]) -> bool:
        if ids[-1] not in self.triggers:
            return False
        if self.stops:
            tail = self.tokenizer.decode(ids[-self.window:])
            if any(s in tail for s in self.stops):
                return True
        return self.boxed and first_box_end(self.tokenizer.decode(ids)) is not None

    def cut(self, text: str) -> str:
        return cut_at_stop(text, self.stops, self.boxed)


@functools.lru_cache(maxsize=4)
def token_texts(tokenizer) -> list[str]:
    return tokenizer.batch_decode([[i] for i in range(len(tokenizer))])


# ---------------------------------------------------------------- the loop


def decode(model, prompts: Sequence[Sequence[int]], *, max_new_tokens: int,
           temperature: float, top_k: int = 0, top_p: float = 1.0, min_new_tokens: int = 0,
           eos_ids: Sequence[int] = (), stop: StopCheck | None = None,
           generator: torch.Generator | None = None) -> list[list[int]]:
    """New token ids for each prompt (token ids), decoded as one batch; a row that ended at
    EOS ends with its EOS token."""
    with torch.inference_mode():
        return _decode_batch(model, prompts, max_new_tokens, temperature, top_k, top_p,
                             min_new_tokens, set(eos_ids), stop, generator)


def length_sorted_batches(prompts: Sequence[Sequence[int]], size: int) -> list[list[int]]:
    """Indices of `prompts` in batches of `size`, by length so that little padding is
    needed, and identical prompts next to each other so that they share a prefill."""
    order = sorted(range(len(prompts)), key=lambda i: (len(prompts[i]), prompts[i]))
    return [order[i:i + size] for i in range(0, len(order), size)]


def _decode_batch(model, prompts, max_new_tokens, temperature, top_k, top_p, min_new_tokens,
                  eos, stop, generator) -> list[list[int]]:
    device = model.device
    # the samples of one prompt share its prefill: each distinct prompt is run once
    distinct: dict[tuple[int, ...], int] = {}
    source = torch.tensor([distinct.setdefault(tuple(p), len(distinct)) for p in prompts],
                          device=device)  # [B]: row -> distinct prompt
    batch, width = len(distinct), max(len(p) for p in prompts)
    capacity = width + max_new_tokens
    input_ids = torch.zeros(batch, width, dtype=torch.long)  # [U, P]
    valid = torch.zeros(batch, capacity, dtype=torch.bool)  # [U, cap]: non-pad positions
    for r, ids in enumerate(distinct):
        input_ids[r, width - len(ids):] = torch.tensor(ids)
        valid[r, width - len(ids):width] = True
    input_ids, valid = input_ids.to(device), valid.to(device)
    positions = (valid[:, :width].cumsum(-1) - 1).clamp(min=0)  # [U, P]
    # causal over real tokens; a pad query attends to itself only (no fully-masked row)
    causal = torch.ones(width, width, dtype=torch.bool, device=device).tril()
    eye = torch.eye(width, dtype=torch.bool, device=device)
    mask = (causal & valid[:, None, None, :width]) | eye  # [U, 1, P, P]
    cache = PreallocatedCache(model.config.get_text_config().num_hidden_layers, capacity)
    logits = model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                   cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1]  # [U, V]
    if len(distinct) < len(prompts):
        cache.select_rows(source)
        logits, valid, positions = logits[source], valid[source], positions[source]  # [B, ...]

    new: list[list[int]] = [[] for _ in prompts]
    live = list(range(len(prompts)))  # prompt index of each batch row
    done = [False] * len(prompts)  # per batch row
    position = positions[:, -1]  # [B]
    length = width
    for step in range(max_new_tokens):
        logits = logits.float()  # [B, V]
        if step < min_new_tokens and eos:
            logits[:, list(eos)] = float("-inf")
        tokens = next_tokens(logits, temperature, top_k, top_p, generator)  # [B]
        last = step + 1 == max_new_tokens
        for r, t in enumerate(tokens.tolist()):
            if done[r]:
                continue
            ids = new[live[r]]
            ids.append(t)
            if last or t in eos or (stop is not None and stop.ends(ids)):
                done[r] = True
        finished = sum(done)
        if finished == len(live) or last:
            break
        if finished >= COMPACT_SHARE * len(live):
            keep = [r for r in range(len(live)) if not done[r]]
            rows = torch.tensor(keep, device=device)
            cache.select_rows(rows)
            valid, tokens, position = valid[rows], tokens[rows], position[rows]
            live, done = [live[r] for r in keep], [False] * len(keep)
        valid[:, length] = True
        position = position + 1
        length += 1
        logits = model(input_ids=tokens[:, None], attention_mask=valid[:, None, None, :length],
                       position_ids=position[:, None], cache=cache, use_cache=True).logits[:, -1]
    return new


# ---------------------------------------------------------------- TRL's rollouts


def _sampling_args(config) -> dict | None:
    """`decode` arguments for a transformers GenerationConfig, or None when it asks for
    something the loop does not do (beams, penalties, min-p, several returns...)."""
    unsupported = (
        (config.num_beams or 1) > 1 or (config.num_return_sequences or 1) > 1
        or config.repetition_penalty not in (None, 1.0) or config.min_p is not None
        or config.no_repeat_ngram_size or config.bad_words_ids or config.suppress_tokens
        or config.stop_strings or config.max_new_tokens is None)
    if unsupported:
        return None
    eos = config.eos_token_id
    return {"max_new_tokens": config.max_new_tokens,
            "temperature": (config.temperature or 1.0) if config.do_sample else 0.0,
            "top_k": config.top_k or 0, "top_p": config.top_p or 1.0,
            "min_new_tokens": config.min_new_tokens or 0,
            "eos_ids": [] if eos is None else [eos] if isinstance(eos, int) else list(eos)}


def generate_like_hf(model, sampler, input_ids=None, attention_mask=None,
                     generation_config=None, **kwargs):
    """`model.generate(input_ids=, attention_mask=, generation_config=)` through `decode` on
    `sampler` (the model itself, or its copy in the generation dtype): the prompt (with its
    left padding) followed by the new tokens, right-padded with the pad token."""
    args = _sampling_args(generation_config) if generation_config is not None else None
    if args is None or kwargs or input_ids is None:
        return type(model).generate(model, input_ids=input_ids, attention_mask=attention_mask,
                                    generation_config=generation_config, **kwargs)
    if sampler is not model:
        sync_weights(model, sampler)
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    prompts = [ids[m.bool()].tolist() for ids, m in zip(input_ids, attention_mask,
                                                        strict=True)]
    new = decode(sampler, prompts, **args)
    pad = generation_config.pad_token_id
    width = max(len(ids) for ids in new)
    out = torch.full((len(new), width), pad, dtype=input_ids.dtype)  # [B, T]
    for r, ids in enumerate(new):
        out[r, :len(ids)] = torch.tensor(ids, dtype=input_ids.dtype)
    return torch.cat([input_ids, out.to(input_ids.device)], dim=1)  # [B, P + T]


def sync_weights(source, target) -> None:
    """Copy `source`'s parameters into `target` (same architecture, any dtype)."""
    params = dict(target.named_parameters())
    with torch.no_grad():
        for name, p in source.named_parameters():
            params[name].copy_(p)


def generation_copy(model, dtype: torch.dtype):
    """The model itself when it is already in `dtype`, else a frozen copy in `dtype`."""
    if model.dtype == dtype:
        return model
    sampler = copy.deepcopy(model).to(dtype).eval()
    sampler.requires_grad_(False)
    return sampler


@contextmanager
def rollouts_through_decode(model, dtype: torch.dtype) -> Iterator[None]:
    """While open, `model.generate` samples with `decode` on a `dtype` copy of the weights,
    refreshed from `model` at every call; `model`'s own weights (fp32 masters) are untouched."""
    if not supports_decode(model):
        yield
        return
    model.generate = functools.partial(generate_like_hf, model, generation_copy(model, dtype))
    try:
        yield
    finally:
        del model.generate
